"""GT404's tests around a model made again: the name it is made under (and what that name
stands for), the optimizer built before over its parameters and stepped after, and the
``self.<x> = ...`` a method called on it replaces."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.params import builds_module
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import is_parameter_call
from gradtrace.lint.rules.registration._modules import (
    OptimizerBuild, _strip, covers, module_ctor, rebound_between, step_lines,
)
from gradtrace.lint.rules.registration._recreated import all_builds
from gradtrace.lint.statement_shapes import exit_after


# NOTE [stale from the next pass]: ``model = copy.deepcopy(best)`` (a restore of the best
# weights) in a branch of the epoch loop, with the optimizer built before the loop over the first
# model's parameters and stepped in the loop above that line: from the next pass on, the loop
# trains the new copy through an optimizer that holds the old tensors, so the copy never changes
# (torch 2.13: `optimizer.param_groups` keep the objects they were given). Not when the loop
# builds the optimizer again, or leaves right after (`break`, `return`).


def _base(e: ast.AST) -> str | None:
    """``model`` for ``model``, ``model.cuda()``, ``model.to(dev).half()``."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        e = e.func.value
    return dotted(e)


def _stale_optimizer(scope: Scope, target: str, node: ast.stmt
                     ) -> tuple[OptimizerBuild, int] | None:
    """An optimizer built before ``node`` from ``target``'s parameters and stepped after it,
    where the flow from ``node`` goes on (not past a ``return`` that ends ``node``'s branch)."""
    line = node.lineno
    end = exit_after(scope.node, node)
    for opt in all_builds(scope):  # NOTE [optimizer a model builds]
        taken = _taken_line(scope, opt)
        if (opt.stmt.lineno >= line and not (taken is not None and taken < line)) or not any(
                covers(target, s) or covers(s, target) for s in opt.sources):
            continue
        if scope.exclusive(opt.stmt, node):  # NOTE [replaced on another arm]
            continue
        for step in step_lines(scope, opt.name):
            if step > line and (end is None or step < end) and not rebound_between(scope, opt.name, opt.stmt.lineno, step):
                if not any(line < m.stmt.lineno < step for m in scope.calls_to("add_param_group")
                           if m.receiver == opt.name):
                    return opt, step
        step = _next_pass_step(scope, opt, node)
        if step is None and not step_lines(scope, opt.name):
            step = _handed_back(scope, opt.name, line, end)
        if step is not None:
            return opt, step
    return None


# NOTE [replaced on another arm]
# ``if phase == "train_da": FT = Net(); opt = Adam(FT.parameters())`` ... ``else: FT = Net()``
# (the test phase builds the model it loads into, and no optimizer): the build of the optimizer
# and the later binding sit in different arms of one ``if`` (or cases of one ``match``), so no
# pass runs both; the optimizer of the train arm holds the model it trains. Only the arms of
# one statement count (``Scope.exclusive``); two ``if`` statements on the same flag do not.


def _handed_back(scope: Scope, name: str, line: int, end: int | None) -> int | None:
    """# NOTE [stale optimizer handed back]
    A builder (``net = Net(); opt = SGD(net.parameters()); net.fc = nn.Linear(...);
    return net, opt``) steps nothing itself: its caller steps the optimizer it returns, still
    over the replaced objects. The line of a ``return`` after ``line`` (on the flow that goes
    on from it) handing back ``name``, alone or in a tuple; None in a module's body. Only for
    a builder that steps the optimizer nowhere itself: a function that trains with it and
    returns it on an early branch hands back what it has finished with."""
    if scope.node is scope.ctx.tree:
        return None
    for r in scope.stmts:
        if not isinstance(r, ast.Return) or r.lineno <= line or end is not None and r.lineno > end:
            continue
        v = r.value
        elts = v.elts if isinstance(v, ast.Tuple) else [v]
        if any(isinstance(e, ast.Name) and e.id == name for e in elts):
            return r.lineno
    return None


def _taken_line(scope: Scope, opt: OptimizerBuild) -> int | None:
    """The line where a list of the parameter objects ``opt`` is built over was made:
    ``params = list(model.parameters())`` (also ``[*...]``, ``[p for p in ...]``) holds the
    objects of that line, so a submodule replaced before ``opt`` is built is missing from it.
    None for a generator (``model.parameters()`` is read when the optimizer is built)."""
    first = opt.call.args[0] if opt.call.args else None
    if not isinstance(first, ast.Name):
        return None
    b = scope.binding_before(first.id, opt.stmt.lineno)
    v = b.value if b is not None else None
    if isinstance(v, ast.Call) and scope.ctx.call_name(v) in ("list", "tuple") and v.args:
        inner = v.args[0]
    elif isinstance(v, ast.ListComp):
        inner = v.generators[0].iter
    elif isinstance(v, ast.List) and len(v.elts) == 1 and isinstance(v.elts[0], ast.Starred):
        inner = v.elts[0].value
    else:
        return None
    ok = isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
        and inner.func.attr in ("parameters", "named_parameters") and not inner.args
    return b.line if ok and b is not None else None


def _next_pass_step(scope: Scope, opt: OptimizerBuild, node: ast.stmt) -> int | None:
    """A step of ``opt`` above ``node`` in a loop around both that the optimizer was built
    before (NOTE [stale from the next pass]), when the loop goes on after ``node``."""
    for loop in reversed(scope.loops_of(node)):
        lo, hi = loop.lineno, loop.end_lineno or loop.lineno
        if lo <= opt.stmt.lineno <= hi or _leaves_after(loop, node):
            return None
        if any(lo <= b.line <= hi for b in scope.bindings.get(opt.name, ())):
            return None  # the optimizer is built again in the loop
        for step in step_lines(scope, opt.name):
            if lo <= step < node.lineno:
                return step
    return None


def _leaves_after(loop: ast.stmt, node: ast.stmt) -> bool:
    """A ``break``, ``return`` or ``raise`` follows ``node`` in its own block (inside
    ``loop``): the loop never runs again after it."""
    for n in walk(loop):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and node in block:
                after = block[block.index(node) + 1:]
                return any(isinstance(x, (ast.Break, ast.Return, ast.Raise)) for x in after)
    return False


def _same_module(scope: Scope, target: str, line: int) -> list[str]:
    """``target`` and what its root name was bound to: ``model.module if hasattr(model,
    "module") else model`` (the unwrapped model) stands for ``model.module`` and ``model``."""
    out = [target]
    root, dot, rest = target.partition(".")
    b = scope.binding_before(root, line)
    v = b.value if b is not None else None
    for e in (v.body, v.orelse) if isinstance(v, ast.IfExp) else (v,):
        d = dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
        if d and d != root:
            out.append(d + dot + rest)
    return out


def _own_replacement(call: ast.Call, target: str, ctx: Context) -> ast.stmt | None:
    """The ``self.<x> = nn.Parameter(...)`` (or a new module) in the method ``call`` runs on
    ``target``'s object: the statement to change (copy into the parameter instead)."""
    fn = called_function(call, ctx.scope(), call.lineno)
    if fn is None:
        return None
    if isinstance(call.func, ast.Attribute) and dotted(call.func.value) == target \
            and fn.args.args and fn.args.args[0].arg == "self":
        for n in walk(fn):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Attribute) \
                    and dotted(n.targets[0].value) == "self" \
                    and (module_ctor(n.value, ctx) or is_parameter_call(n.value, ctx)):
                return n
        return None
    # `load_pretrained(model, t)` whose `model.emb.weight = nn.Parameter(t)` makes a new
    # parameter of its argument: that assignment is the line to change (copy into it)
    params = {p for p, v in ctx.analysis.arguments(fn, call).items() if dotted(v) == target}
    for n in walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Attribute) \
                and (dotted(n.targets[0]) or "").partition(".")[0] in params \
                and is_parameter_call(n.value, ctx):
            return n
    return None


def added_attribute(ctx: Context, node: ast.stmt, target: str, inside: ast.stmt | None,
                    scope: Scope) -> str | None:
    """# NOTE [added, not replaced]
    The attribute (in the caller's terms: ``model.scale``) that ``inside`` (a method's or
    helper's ``self.scale = nn.Parameter(...)`` / ``m.scale = ...``, run on ``target`` at
    ``node``) or ``node`` itself (``model.scale = nn.Parameter(...)``) sets for the first time
    on an object of a class of the file whose ``__init__`` (its own or a base's of the file)
    does not make ``scale``. ``nn.Module.__setattr__`` registers the new parameter, but an
    optimizer built before holds only the tensors it was given: the new one gets gradients
    and never moves (torch 2.13). None: the attribute already existed (a replacement), or the
    object's class is unknown."""
    st = inside if inside is not None else node
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Attribute)):
        return None
    attr = st.targets[0].attr
    owner = st.targets[0].value
    if inside is None:
        if dotted(owner) != target.rpartition(".")[0] or not target.count(".") == 1:
            return None
        obj: ast.expr = owner
    else:
        if not isinstance(owner, ast.Name):
            return None
        obj = ast.parse(target, mode="eval").body
        for n in ast.walk(obj):  # (not the shared `Load` contexts: they have no position)
            if "lineno" in n._attributes:
                n.lineno, n.col_offset = node.lineno, 0  # type: ignore[attr-defined]
    k = ctx.analysis.kind(obj, scope, node.lineno)
    cls = ctx.analysis.classes.get(k.cls or "") if k is not None else None
    if cls is None:
        return None
    if any(attr in c.init_attrs for c in cls.lineage()):
        return None  # `__init__` makes it: this one replaces it
    return f"{target if inside is not None else dotted(owner)}.{attr}"


def inside_name(target: str, inside: ast.stmt | None) -> str:
    """What ``inside`` (``m.emb.weight = nn.Parameter(t)`` in a helper handed ``model``, or
    ``self.scale = ...`` in a method of ``model``) sets, spelt from ``target``
    (``model.emb.weight``); ``target`` itself for anything else."""
    t = inside.targets[0] if isinstance(inside, ast.Assign) and len(inside.targets) == 1 \
        else None
    name = dotted(t) if isinstance(t, ast.Attribute) else None
    return target + "." + name.partition(".")[2] if name else target


def rebuilds_argument(call: ast.Call, target: str, scope: Scope, ctx: Context) -> bool:
    """# NOTE [argument built again]
    ``model = maybe_resume(model, path)`` where the file's function binds the parameter it got
    ``model`` in to a newly built module on some path (``model = make_net()`` before
    ``load_state_dict``) and returns that parameter: on that path the caller's name holds a new
    object, and an optimizer built before the call holds the old one's tensors. A rebinding
    that wraps the parameter itself (``model = DataParallel(model)``) keeps its tensors."""
    if "." in target:
        return False
    fn = called_function(call, scope, call.lineno)
    if fn is None:
        return False
    params = [p for p, v in ctx.analysis.arguments(fn, call).items()
              if isinstance(v, ast.Name) and v.id == target]
    if len(params) != 1:
        return False
    p, inner = params[0], ctx.scope(fn)
    if not any(isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id == p
               for r in inner.stmts):
        return False
    for b in inner.bindings.get(p, ()):
        v = _strip(b.value) if b.value is not None and isinstance(b.stmt, ast.Assign) else None
        if not isinstance(v, ast.Call) or any(
                _base(a) == p for a in [*v.args, *(k.value for k in v.keywords)]):
            continue
        g = called_function(v, inner, b.line)
        if module_ctor(v, ctx) or g is not None and g is not fn and builds_module(g, ctx):
            return True
    return False

