"""What a file does with ``self.X`` attributes: handed to a registering call or an optimizer,
or used only as a switch (facts GT401-GT403 share)."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import child_nodes, peel, walk
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration._accessor_uses import only_looked_at
from gradtrace.lint.rules.registration._stateless import CONTAINERS

REGISTERING_CALLS = frozenset({"add_module", "register_module", "register_parameter",
                               "register_buffer", "setattr"})
FILLS = frozenset({"append", "extend", "insert"})


def _self_attr(node: ast.AST) -> str | None:
    """``X`` for a target ``self.X``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "self":
        return node.attr
    return None


def _wrapped_attrs(ctx: Context) -> frozenset[str]:
    """Attribute names passed (or starred) to an ``nn`` container or ``nn.Parameter`` anywhere,
    and ``self.X`` handed whole to the constructor of another class (``Decoder(self.blocks)``:
    a child module that may register the entries itself); also what is appended to, or extends,
    a ``self.Y`` the file makes an ``nn`` container (``self.layers.extend(self.hidden[i].layers)``:
    the entries' layers are registered through ``self.layers``)."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        held = {a for n in walk(ctx.tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and (a := _self_attr(n.targets[0])) and isinstance(n.value, ast.Call)
                and (ctx.call_name(n.value) or "") in CONTAINERS}
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call):
                args = [*n.args, *(k.value for k in n.keywords)]
                qual = ctx.call_name(n) or ""
                if qual in CONTAINERS or (
                        isinstance(n.func, ast.Attribute) and n.func.attr in REGISTERING_CALLS) \
                        or (isinstance(n.func, ast.Attribute) and n.func.attr in FILLS
                            and _self_attr(n.func.value) in held):
                    for a in args:
                        out.update(x.attr for x in walk(a) if isinstance(x, ast.Attribute))
                elif qual.rpartition(".")[2][:1].isupper() and not qual.startswith("torch."):
                    out.update(x for a in args if (x := _self_attr(
                        a.value if isinstance(a, ast.Starred) else a)))
        return frozenset(out)
    return ctx.memo("gt4-wrapped-attrs", ctx.tree, make)


def _optimized_attrs(ctx: Context) -> frozenset[str]:
    """Attribute names handed to a ``torch.optim`` optimizer directly anywhere in the file
    (``RMSprop([self.lambda_op])``, or of an instance: ``Adam([net.w, net.alpha])``, uber's
    plasticity networks): tensors the code optimizes itself, not via ``parameters()``;
    also those a method of their class returns in a list or tuple, directly or through an
    attribute holding it (DARTS's ``def arch_parameters(self): return self._arch_parameters``
    with ``self._arch_parameters = [self.alphas_normal, ...]``): a parameter group the module
    hands out for the caller's own optimizer, kept out of ``parameters()`` on purpose."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        if ctx.mentions("optim"):
            for n in walk(ctx.tree):
                if isinstance(n, ast.Call) and is_optimizer_call(n, ctx):
                    for a in [*n.args, *(k.value for k in n.keywords)]:
                        out.update(x for x in map(_self_attr, walk(a)) if x)
                        out.update(e.attr for e in getattr(a, "elts", ()) if isinstance(
                            e, ast.Attribute) and isinstance(e.value, ast.Name))
        out.update(_handed_out(ctx))
        return frozenset(out)
    return ctx.memo("gt4-optimized-attrs", ctx.tree, make)


def _handed_out(ctx: Context) -> set[str]:
    """``self.X`` listed in a list/tuple literal of ``self`` attributes only that a method
    taking nothing but ``self`` (not ``forward``) returns, directly or through a
    ``self.Y = [...]`` it returns (see ``_optimized_attrs``); or that such a ``self.Y`` holds
    which no method of the file reads: the list is there for the caller, who hands it to
    its own optimizer (another file's ``torch.optim.Adam(model.alpha)``); not an accessor
    whose lists the file only looks at (NOTE [accessor only looked at])."""
    lists: dict[str, ast.expr] = {}
    for n in walk(ctx.tree):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.value, (ast.List, ast.Tuple)) \
                and (held := _self_attr(n.targets[0])) is not None:
            lists[held] = n.value
    out: set[str] = set()
    read = {n.attr for n in walk(ctx.tree) if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)
            and n.value.id == "self" and n.attr in lists}
    for held, v in lists.items():  # `self.alpha = [self.alpha1, ...]`, never read by its class:
        if held not in read and v.elts and all(_self_attr(x) for x in v.elts):  # the caller's
            out.update(x for x in map(_self_attr, v.elts) if x)  # `Adam(model.alpha)`
    for fn in walk(ctx.tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name == "forward" \
                or [a.arg for a in fn.args.args] != ["self"]:
            continue  # an accessor takes nothing but self; forward's tuple is its output
        for n in walk(fn):
            if isinstance(n, ast.Return) and n.value is not None:
                v = n.value
                if (held := _self_attr(v)) is not None:
                    v = lists.get(held, v)
                if isinstance(v, (ast.List, ast.Tuple)) and v.elts and all(_self_attr(
                        x) for x in v.elts) and not only_looked_at(ctx, fn.name):
                    out.update(x for x in map(_self_attr, v.elts) if x)
    return out


def _grad_switches(ctx: Context) -> frozenset[str]:
    """``self.X`` only ever read to make other tensors require grad, never trained: added and
    taken away again (``x + self.dummy - self.dummy``) or handed to a ``checkpoint`` call, the
    trick that lets reentrant checkpointing see an input that requires grad; or a probe the
    code differentiates with respect to (``autograd.grad(loss, [self.scale])``, IRM's dummy
    classifier scale): its gradient is read there, an optimizer must not move it."""
    def make() -> frozenset[str]:
        reads: dict[str, int] = {}
        switch: dict[str, int] = {}
        probes: set[str] = set()  # `autograd.grad(loss, [self.scale])`: a gradient is measured
        for n in walk(ctx.tree):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) \
                    and (attr := _self_attr(n)) is not None:
                reads[attr] = reads.get(attr, 0) + 1
            elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub)) \
                    and isinstance(n.left, ast.BinOp) and type(n.left.op) is not type(n.op) \
                    and isinstance(n.left.op, (ast.Add, ast.Sub)):
                a, b = _self_attr(n.left.right), _self_attr(n.right)
                if a is not None and a == b:
                    switch[a] = switch.get(a, 0) + 2
            elif isinstance(n, ast.Call) and (ctx.call_name(n) or dotted(n.func) or "") \
                    .rpartition(".")[2] == "checkpoint":
                for a in n.args[1:]:
                    if (attr := _self_attr(a)) is not None:
                        switch[attr] = switch.get(attr, 0) + 1
            elif isinstance(n, ast.Call) and ctx.call_name(n) == "torch.autograd.grad":
                probes.update(_grad_inputs(n))
        return frozenset(a for a, k in switch.items() if k == reads.get(a)) | probes
    if not ctx.mentions("requires_grad"):
        return frozenset()
    return ctx.memo("gt4-grad-switches", ctx.tree, make)


def _grad_inputs(call: ast.Call) -> set[str]:
    """The ``self.X`` among the inputs of an ``autograd.grad`` call."""
    inputs = call.args[1] if len(call.args) > 1 else next(
        (k.value for k in call.keywords if k.arg == "inputs"), None)
    elts = inputs.elts if isinstance(inputs, (ast.List, ast.Tuple)) else [inputs]
    return {a for e in elts if e is not None and (a := _self_attr(e)) is not None}


def _registers_dynamically(cls: ast.ClassDef) -> bool:
    for n in walk(cls):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("add_module", "register_module", "register_parameter", "setattr"):
                return True
    return False


# classes imported from elsewhere, named like layers that own parameters


def picked_attrs(cls: ast.ClassDef) -> frozenset[str]:
    """``self.X`` of ``cls`` read only as ``self.X[key]`` whose entry is then stored on
    ``self`` (``self.backbone = self.models[name]``, or through a method of the class that
    returns it: ``self.backbone = self._get_model(name)``): a table of choices whose chosen
    entry is registered by that assignment; the others are meant to stay out."""
    methods = {m.name: m for m in cls.body if isinstance(m, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef))}
    stored: set[int] = set()   # ids of values assigned to `self.Y`
    called: set[str] = set()   # methods whose result is assigned to `self.Y`
    for n in walk(cls):
        if isinstance(n, ast.Assign) and any(_self_attr(t) for t in n.targets):
            stored.add(id(n.value))
            if isinstance(n.value, ast.Call) and _self_attr(n.value.func):
                called.add(n.value.func.attr)  # type: ignore[attr-defined]
                called |= _built_in(n.value, methods)
    called |= _registered_locals(cls)
    returned: set[int] = set()  # ids of `self.X[k]` a called method returns
    for name in called & set(methods):
        m = methods[name]
        rets = [r.value for r in walk(m) if isinstance(r, ast.Return) and r.value is not None]
        names = {r.id for r in rets if isinstance(r, ast.Name)}
        returned.update(id(r) for r in rets)
        returned.update(id(a.value) for a in walk(m) if isinstance(a, ast.Assign)
                        and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
                        and a.targets[0].id in names)
    ok: dict[str, bool] = {}
    parents = {id(c): p for p in walk(cls) for c in child_nodes(p)}
    for n in walk(cls):
        attr = _self_attr(n)
        if attr is None or not isinstance(n.ctx, ast.Load):  # type: ignore[attr-defined]
            continue
        p = parents.get(id(n))
        if isinstance(p, ast.Subscript) and p.value is n and isinstance(p.ctx, ast.Store):
            continue  # a fill: `self.X[k] = layer`
        if isinstance(p, ast.Compare) and n in p.comparators and all(
                isinstance(o, (ast.In, ast.NotIn)) for o in p.ops):
            continue  # `if name not in self.X:`: reads the keys, not an entry
        pick = isinstance(p, ast.Subscript) and p.value is n and (
            id(p) in stored or id(p) in returned)
        ok[attr] = ok.get(attr, True) and pick
    return frozenset(a for a, v in ok.items() if v)



_PARTS = frozenset({"children", "modules", "named_children"})


def _built_in(call: ast.Call, methods: dict[str, ast.AST]) -> set[str]:
    """Methods of the class whose result ``call`` (``self.head = self._make_head(moe=
    self.get_moe("r"))``, a call of a method stored on ``self``) hands to a parameter that its
    method builds into what it returns (an element of a list or an argument of a call in the
    ``return``, through the locals it fills: ``modules = [norm, moe, out]`` then ``return
    Head(nn.Sequential(*modules))``): the picked entry is held by the stored result."""
    m = methods.get(call.func.attr) if isinstance(call.func, ast.Attribute) else None
    if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    params = [a.arg for a in m.args.args][1:]
    given = dict(zip(params, call.args))
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    held = _held_in_return(m)
    return {v.func.attr for p, v in given.items() if p in held and isinstance(v, ast.Call)
            and isinstance(v.func, ast.Attribute) and _self_attr(v.func.value) is None
            and isinstance(v.func.value, ast.Name) and v.func.value.id == "self"}


def _held_in_return(m: ast.AST) -> set[str]:
    """Names ``m`` places in its returned value: a returned name, an element of a list or
    tuple, an argument (or starred argument) of a call there, and what the locals so placed
    are filled with (``modules = [...]``, ``modules.append(x)``)."""
    def placed(e: ast.AST | None) -> set[str]:
        out: set[str] = set()
        todo = [e] if e is not None else []
        while todo:
            x = todo.pop()
            if isinstance(x, ast.Starred):
                x = x.value
            if isinstance(x, ast.Name):
                out.add(x.id)
            elif isinstance(x, (ast.List, ast.Tuple)):
                todo.extend(x.elts)
            elif isinstance(x, ast.Call):
                todo.extend([*x.args, *(k.value for k in x.keywords)])
        return out
    held: set[str] = set()
    for r in walk(m):
        if isinstance(r, ast.Return):
            held |= placed(r.value)
    grew = True
    while grew:
        grew = False
        for a in walk(m):
            got: set[str] = set()
            if isinstance(a, ast.Assign) and len(a.targets) == 1 \
                    and isinstance(a.targets[0], ast.Name) and a.targets[0].id in held:
                got = placed(a.value)
            elif isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
                    and a.func.attr in ("append", "extend", "insert") \
                    and isinstance(a.func.value, ast.Name) and a.func.value.id in held:
                got = placed(a.args[-1]) if a.args else set()
            if got - held:
                held |= got
                grew = True
    return held


def _registered_locals(cls: ast.ClassDef) -> set[str]:
    """Methods whose result a method of ``cls`` binds to a local that a value stored on
    ``self`` then holds, whole or by its parts (SimCLR's ``resnet = self._get_basemodel(name)``
    then ``self.features = nn.Sequential(*list(resnet.children())[:-1])``): what the method
    picks is registered through that attribute."""
    out: set[str] = set()
    for m in cls.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        picked = {a.targets[0].id: a.value.func.attr for a in walk(m)  # type: ignore[union-attr]
                  if isinstance(a, ast.Assign) and len(a.targets) == 1
                  and isinstance(a.targets[0], ast.Name) and isinstance(a.value, ast.Call)
                  and _self_attr(a.value.func)}
        if not picked:
            continue
        for a in walk(m):
            if isinstance(a, ast.Assign) and any(_self_attr(t) for t in a.targets):
                inner = {id(x.value) for x in walk(a.value) if isinstance(x, ast.Attribute)}
                for n in walk(a.value):
                    held = n if isinstance(n, ast.Name) and id(n) not in inner else \
                        n.func.value if isinstance(n, ast.Call) and isinstance(
                            n.func, ast.Attribute) and n.func.attr in _PARTS else None
                    if isinstance(held, ast.Name) and held.id in picked:
                        out.add(picked[held.id])
    return out


INPUT_COPIES = frozenset({"torch.autograd.Variable", "torch.tensor", "torch.as_tensor"})
LIKE_FACTORIES = frozenset({"torch.zeros_like", "torch.ones_like", "torch.randn_like",
                            "torch.rand_like", "torch.empty_like", "torch.full_like",
                            "torch.randint_like"})
_SAME_DATA = frozenset({"to", "cuda", "cpu", "float", "double", "half", "long", "contiguous",
                        "clone", "detach", "view", "reshape", "squeeze", "unsqueeze"})


def per_call_input(call: ast.Call, fn: ast.AST, ctx: Context) -> bool:
    """``self.var_x = Variable(self.input_x, requires_grad=True)`` in a method other than
    ``__init__`` whose data comes from the method's own arguments (``self.input_x =
    batch['x']``): an input of this call made to require grad (gradients with respect to the
    input), rebuilt on every call, not a learnable tensor of the module."""
    if getattr(fn, "name", "__init__") == "__init__" or ctx.call_name(call) not in INPUT_COPIES \
            or not call.args:
        return False
    return from_arguments(call.args[0], call.lineno, fn, ctx)


def from_arguments(e: ast.AST, line: int, fn: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """``e`` holds (a view or copy of) an argument of ``fn``, through its local names."""
    a = fn.args  # type: ignore[attr-defined]
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
    e = peel(e, _SAME_DATA)
    d = dotted(e)
    if d is None or depth > 4:
        return False
    b = ctx.scope(fn).binding_before(d, line)
    if b is None:
        return d.partition(".")[0] in params
    return b.value is not None and from_arguments(b.value, b.line, fn, ctx, depth + 1)


def input_sized(call: ast.Call, fn: ast.AST, ctx: Context) -> bool:
    """``self.h = torch.zeros((B, 2 * d), requires_grad=True)`` in a method other than
    ``__init__`` with ``B`` the batch size of an argument (``B, _, d = x.shape``,
    ``x.size(0)``, ``x.shape[0]``): a state of this call's batch (Comprehensive-Transformer-
    TTS's initial GRU hidden state), made anew on every call, not a weight of the module (a
    weight made lazily from the input's feature size, ``x.size(1)``, is still reported)."""
    if getattr(fn, "name", "__init__") == "__init__":
        return False
    made = call
    while isinstance(made.func, ast.Attribute) and made.func.attr in _SAME_DATA \
            and isinstance(made.func.value, ast.Call):
        made = made.func.value  # `torch.randn_like(y, requires_grad=True).to(y)`
    if ctx.call_name(made) in LIKE_FACTORIES and made.args:  # `y` an input: made anew for
        return from_arguments(made.args[0], made.lineno, fn, ctx)  # each call (noise, a state)
    a = fn.args  # type: ignore[attr-defined]
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
    scope = ctx.scope(fn)

    def shape_of_input(e: ast.AST) -> bool:  # `x.shape` / `x.size()` of an argument
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.args:
            e = e.func
        return isinstance(e, ast.Attribute) and e.attr in ("shape", "size") \
            and isinstance(e.value, ast.Name) and e.value.id in params

    def batch_of_input(e: ast.AST) -> bool:  # `x.shape[0]`, `x.size(0)`
        if isinstance(e, ast.Subscript):
            return num_index(e.slice) == 0 and shape_of_input(e.value)
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "size" and len(e.args) == 1 and num_index(e.args[0]) == 0 \
            and isinstance(e.func.value, ast.Name) and e.func.value.id in params

    todo = list(call.args)  # an argument sized by the input's batch, through tuples and sums
    while todo:
        e = todo.pop()
        if batch_of_input(e):
            return True
        if isinstance(e, ast.Name):
            b = scope.binding_before(e.id, call.lineno)  # (`B, _, d = x.shape`: no value)
            st = b.stmt if b is not None else None
            if not isinstance(st, ast.Assign) or len(st.targets) != 1:
                continue
            t = st.targets[0]
            if isinstance(t, ast.Tuple) and t.elts and isinstance(t.elts[0], ast.Name):
                if t.elts[0].id == e.id and shape_of_input(st.value):
                    return True
            elif isinstance(t, ast.Name) and batch_of_input(st.value):
                return True
        elif isinstance(e, (ast.Tuple, ast.List, ast.BinOp)):
            todo.extend(x for x in child_nodes(e) if isinstance(x, ast.expr))
    return False


def num_index(e: ast.AST) -> int | None:
    return e.value if isinstance(e, ast.Constant) and type(e.value) is int else None


def regrad_leaf(move: ast.Call, ctx: Context) -> bool:
    """``p = nn.Parameter(t).to(device)`` under ``torch.no_grad()``, bound to a local name
    whose ``requires_grad`` the function then turns on (``p.requires_grad = True`` or
    ``p.requires_grad_()``): made with grad off, the copy has no history, a leaf that the
    optimizer takes (MSN's prototypes). Outside ``no_grad`` it is a non-leaf, and turning its
    flag on raises."""
    st, scope = ctx.statement, ctx.scope()
    if not (isinstance(st, ast.Assign) and st.value is move and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)) or scope.grad_off_at(move) is None:
        return False
    name = st.targets[0].id
    for n in walk(scope.node):
        if getattr(n, "lineno", 0) <= st.lineno:
            continue
        if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                and isinstance(t.value, ast.Name) and t.value.id == name for t in n.targets):
            return isinstance(n.value, ast.Constant) and n.value.value is True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "requires_grad_" and dotted(n.func.value) == name:
            return True
    return False


def hand_listed(cls: ast.ClassDef) -> frozenset[str]:
    """``self.X`` that the class's own ``parameters()`` override reads (epymarl's per-agent
    critics: ``def parameters(self): params = list(self.critics[0].parameters()) ...``): the
    class lists that container's parameters by hand, so an optimizer built on ``parameters()``
    holds them (its ``state_dict``/``cuda`` overrides are the author's to keep in step)."""
    own = next((m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                and m.name == "parameters"), None)
    if own is None:
        return frozenset()
    return frozenset(a for n in walk(own) if (a := _self_attr(n)) is not None)


def _grouped_elsewhere(attr: str, ctx: Context) -> bool:
    """# NOTE [parameter group built elsewhere]
    Another file of the project reads ``x.<attr>`` into a parameter group: the read sits in
    the ``'params'`` entry of a dict literal, or in a list (``L.append(x.attr)``, ``L =
    [x.attr]``) that the same function hands as such an entry or to a ``torch.optim``
    optimizer. auto_LiRPA's ``_set_gammas``: ``gammas.append(node.gammas_underlying_tensor)``,
    then ``parameters.append({'params': gammas, 'lr': gamma_lr})``: the tensor is optimized,
    kept out of ``parameters()`` on purpose. Other files only (NOTE [reverse index]); a file
    of this one hands it on by :func:`_optimized_attrs`."""
    from gradtrace.lint.analysis.callers import readers
    found = readers(ctx, ("." + attr).encode()) if ctx.mentions("requires_grad") else None
    for octx in found or ():
        for fn in walk(octx.tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and _groups(fn, attr, octx):
                return True
    return False


def _groups(fn: ast.AST, attr: str, octx: Context) -> bool:
    reads = {id(n) for n in walk(fn) if isinstance(n, ast.Attribute) and n.attr == attr
             and isinstance(n.ctx, ast.Load)}
    if not reads:
        return False
    held: set[str] = set()  # the lists a read is put into
    handed: list[ast.AST] = []  # the 'params' entries and the optimizers' arguments
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                "append", "extend") and isinstance(n.func.value, ast.Name) and any(
                id(x) in reads for a in n.args for x in walk(a)):
            held.add(n.func.value.id)
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(
                n.targets[0], ast.Name) and isinstance(n.value, (ast.List, ast.Tuple)) and any(
                id(x) in reads for x in walk(n.value)):
            held.add(n.targets[0].id)
        elif isinstance(n, ast.Dict):
            handed += [v for k, v in zip(n.keys, n.values)
                       if isinstance(k, ast.Constant) and k.value == "params"]
        elif is_optimizer_call(n, octx):
            handed += [*n.args, *(k.value for k in n.keywords)]  # type: ignore[attr-defined]
    return any(id(x) in reads or isinstance(x, ast.Name) and x.id in held
               for h in handed for x in walk(h))
