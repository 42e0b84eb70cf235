"""GT462: parameter groups listed submodule by submodule leave out a submodule the model runs."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callers import unread_member
from gradtrace.lint.analysis.indexed_lists import read_by_index
from gradtrace.lint.analysis.kinds import MODULE, PARAMETER
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.rules.registration._modules import owns_params

PARAM_ITERS = ("parameters", "named_parameters")
# whole-model reads: the function sees every parameter, not only the listed parts
WHOLE = frozenset({"parameters", "named_parameters", "modules", "named_modules", "children",
                   "named_children", "state_dict"})
# what, done to a submodule anywhere in the file, says it is handled on purpose
HANDLED = frozenset({"parameters", "named_parameters", "requires_grad_", "eval", "state_dict",
                     "load_state_dict", "apply", "modules", "named_modules", "children"})


def _part(e: ast.AST) -> tuple[str, str] | None:
    """``(receiver, attr)`` for ``receiver.attr.parameters()``."""
    if isinstance(e, ast.Starred):
        e = e.value
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "list" \
            and len(e.args) == 1:
        e = e.args[0]
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "filter" \
            and len(e.args) == 2:  # `filter(lambda p: p.requires_grad, m.backbone.parameters())`
        e = e.args[1]
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
            and e.func.attr in PARAM_ITERS and isinstance(e.func.value, ast.Attribute)):
        return None
    recv = dotted(e.func.value.value)
    return (recv, e.func.value.attr) if recv else None


def _items(node: ast.expr) -> list[ast.expr]:
    """The elements of a list/tuple, or the terms of a ``+`` chain."""
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, ast.Add):
            return [node]
        return [*_items(node.left), *_items(node.right)]
    if isinstance(node, (ast.List, ast.Tuple)):
        return list(node.elts)
    return [node]


def _prefix(name: str | None, recv: str) -> bool:
    return name is not None and (recv == name or recv.startswith(name + "."))


def _group_part(e: ast.expr) -> tuple[str, str] | None:
    if isinstance(e, ast.Dict):
        for k, v in zip(e.keys, e.values):
            if isinstance(k, ast.Constant) and k.value == "params":
                return _part(v)
        return None
    return _part(e)


def _trainable_attrs(cls: ClassInfo, ctx: Context) -> dict[str, ast.stmt]:
    """The attributes of ``cls`` (its file bases included) that hold a layer with parameters or
    an ``nn.Parameter``, with the statement that set them."""
    out: dict[str, ast.stmt] = {}
    for c in cls.lineage():
        for name, info in c.attrs.items():
            if name in out or info.later or info.method.name != "__init__":
                continue
            k = c.attr_kind(name)
            if k is not None and (k.what == PARAMETER and not _made_frozen(info.value)
                                  or k.what == MODULE and isinstance(k.node, ast.Call)
                                  and owns_params(k.node, ctx, buffers_count=False)
                                  and _filled_with_params(c, name, k.node, ctx)):
                out[name] = info.stmt
    return out


FILLS = frozenset({"append", "extend", "insert", "add_module"})
CONTAINERS = frozenset({"ModuleList", "ModuleDict", "Sequential"})


def _filled_with_params(cls: ClassInfo, name: str, made: ast.Call, ctx: Context) -> bool:
    """An empty container built in ``__init__`` (``nn.ModuleList([])``, ``nn.ModuleList()``)
    holds what the class puts into it: parameters only when some ``self.<name>.append(x)``
    gives it a layer that owns them (``x`` a constructor call, or a local bound to one).
    AudioLDM's ``self.cond_stage_models.append(instantiate_from_config(cfg))``: conditioners
    built (and frozen) by another file's classes. Any other container: as built."""
    if made.args and not (isinstance(made.args[0], ast.List) and not made.args[0].elts) \
            or made.keywords or (ctx.qualified_name(made.func) or "").rpartition(".")[2] \
            not in CONTAINERS:
        return True  # `Backbone()`: a layer, not an empty container
    for m in cls.methods.values():
        for n in walk(m):
            if isinstance(n, ast.AugAssign) and dotted(n.target) == f"self.{name}":
                return True  # `self.layers += [...]`
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in FILLS and dotted(n.func.value) == f"self.{name}"):
                continue
            for a in n.args:
                v = _bound_call(m, a)
                if v is None or owns_params(v, ctx) or isinstance(v, (ast.List, ast.ListComp)):
                    return True
    return False


def _bound_call(m: ast.AST, a: ast.expr) -> ast.expr | None:
    """``a`` itself, or the value of the one assignment to the name ``a`` in ``m``; None when
    the name is bound otherwise (a loop variable, a parameter: what it holds is unknown)."""
    if not isinstance(a, ast.Name):
        return a
    vals = [s.value for s in walk(m) if isinstance(s, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == a.id for t in s.targets)]
    return vals[0] if len(vals) == 1 else None


def _made_frozen(value: ast.expr | None) -> bool:
    """``nn.Parameter(t, requires_grad=False)``: fixed on purpose."""
    return isinstance(value, ast.Call) and any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in value.keywords)


def _held(cls: ClassInfo, parts: set[str]) -> set[str]:
    """Attributes of ``cls`` that a listed part holds: ``self.newly_added =
    nn.ModuleList([self.classifier])`` makes the group over ``newly_added`` list
    ``classifier`` too."""
    out: set[str] = set()
    for c in cls.lineage():
        for name in parts:
            info = c.attrs.get(name)
            if info is None or info.value is None:
                continue
            out.update(n.attr for n in walk(info.value) if isinstance(n, ast.Attribute)
                       and isinstance(n.value, ast.Name) and n.value.id == "self")
    return out


def _used(cls: ClassInfo, name: str, skip: ast.AST, ctx: Context) -> bool:
    """Whether a method of ``cls`` or its file bases other than ``__init__`` and ``skip``
    reads ``self.<name>``. A part the class calls, and calls only with grad off (BYOL's
    momentum projector, run under ``torch.no_grad()`` and read elsewhere only to pair it
    with its online twin for the moving average), gets no gradient: it is not counted."""
    read = False
    calls: list[tuple[ast.AST, ast.Call]] = []
    for c in cls.lineage():
        for m in c.methods.values():
            if m.name == "__init__" or m is skip:
                continue
            for n in walk(m):
                if isinstance(n, ast.Attribute) and n.attr == name and isinstance(
                        n.value, ast.Name) and n.value.id == "self":
                    read = True
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == name and dotted(n.func.value) == "self":
                    calls.append((m, n))
    return read and not (calls and all(ctx.scope(m).grad_off_at(n) is not None
                                       for m, n in calls))


def _run_for_backward(cls: ClassInfo, name: str, ctx: Context) -> bool:
    """Whether a method of a plain (non-module) class calls ``self.<name>(...)`` with grad
    on and runs a ``backward`` itself: the part is trained by that method's loss."""
    for m in cls.methods.values():
        if m.name == "__init__" or not any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "backward" for n in walk(m)):
            continue
        off = [w for w in walk(m) if isinstance(w, ast.With)
               and any("no_grad" in ctx.code_of(i.context_expr)
                       or "inference_mode" in ctx.code_of(i.context_expr) for i in w.items)]
        hidden = {id(n) for w in off for n in walk(w)}
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == name and isinstance(n.func.value, ast.Name)
               and n.func.value.id == "self" and id(n) not in hidden for n in walk(m)):
            return True
    return False


def _freezes_a_part(cls: ClassInfo) -> bool:
    """# NOTE [parts the model freezes]
    ``Adam(self.policy.student.parameters())``, the function's only optimizer, over one part
    of a model whose class freezes another part itself (``for p in self.teacher.parameters():
    p.requires_grad_(False)``, ``self.teacher.requires_grad_(False)``): the class says which
    of its parts do not train, so a further part it runs, neither frozen nor in the optimizer
    (rsl_rl's recurrent student memory ``memory_s``), is left out by mistake. Without such a
    freeze in the class, one optimizer over one part (a head trained on a fixed backbone) is a
    common choice and is not read."""
    for c in cls.lineage():
        for m in c.methods.values():
            for n in walk(m):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == "requires_grad_" and n.args \
                        and isinstance(n.args[0], ast.Constant) and n.args[0].value is False:
                    return True
                if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) \
                        and n.value.value is False and any(
                            isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                            for t in n.targets):
                    return True
    return False


def _handled_attrs(ctx: Context, root: ast.AST | None = None) -> frozenset[str]:
    """(In a learner class, ``root``, reading a part's ``state_dict()`` to load a target
    copy is not a handling: the part is still trained by the class's loss.)"""
    """Attributes ``x.<attr>`` on which the file calls ``parameters()``, ``requires_grad_``,
    ``eval()``... or sets ``requires_grad``, outside the groups being checked (they are
    counted in by the caller)."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        for n in walk(root or ctx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in HANDLED and isinstance(n.func.value, ast.Attribute) \
                    and not (root is not None and n.func.attr == "state_dict"):
                out.add(n.func.value.attr)
            elif isinstance(n, ast.Attribute) and n.attr == "requires_grad" \
                    and isinstance(n.value, ast.Attribute):
                out.add(n.value.attr)
        return frozenset(out)
    return ctx.memo("gt462-handled", root or ctx.tree, make)


class SubmoduleMissingFromParamGroups(Rule):
    """Parameter groups listed submodule by submodule leave out a submodule that the model
    runs: its parameters get gradients and never change.

    Why: `SGD([{'params': model.encoder.parameters()}, {'params': model.head.parameters()}])`
    holds the listed parts only. A layer added to the class (`self.kshot_rw`, a subclass's
    `self.extra_fc`) and run in `forward` but missing from the hand-made list is never updated,
    silently (HDMNet#21, MACE's `get_params_options`, MMF's `get_optimizer_parameters`).
    Add the part to the groups, or build them from `model.named_parameters()`.
    Known limits: the groups must name at least two submodules of one receiver in one list
    (dicts with `'params'`, or the `parameters()` calls themselves), or in a local list the
    function grows before it builds the optimizer (`groups = []`, `groups += [{...}]`,
    `groups.append({...})`: SiamCAR's `build_opt_lr`), every group naming its part; the receiver's class must be
    a class of the file (`self`, a subclass that inherits the method, the kind of the receiver,
    or the only instantiated class of the file that has every listed part); the missing part is
    built in `__init__` with parameters, read by another method, and nothing in the file
    calls `parameters()`, `requires_grad_`, `eval()` or `apply()` on it or sets its
    `requires_grad` (another optimizer, a freeze), and no listed part holds it
    (`self.new = nn.ModuleList([self.head])`). A function that also reads the whole model's
    parameters is left alone, and so is a property returning the groups that nothing in the
    project reads (no other file names it, its own file only defines it).
    """

    code = "GT462"
    name = "submodule-missing-from-param-groups"
    message = ("these parameter groups list {listed} of `{cls}` but not `{missing}`, which "
               "`{cls}` runs (built on line {line}): its parameters get gradients and never "
               "change; add it to the groups")
    triggers = ("parameters(",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(8, 8)
                    self.gate = nn.Linear(8, 8)
                    self.head = nn.Linear(8, 2)
                def forward(self, x):
                    return self.head(self.encoder(x) * self.gate(x).sigmoid())
            model = Net()
            opt = torch.optim.SGD([{"params": model.encoder.parameters()},
                                   {"params": model.head.parameters(), "lr": 0.1}], lr=0.01)
            """, at=(12, 0)),
        Good("""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(8, 8)
                    self.gate = nn.Linear(8, 8)
                    self.head = nn.Linear(8, 2)
                def forward(self, x):
                    return self.head(self.encoder(x) * self.gate(x).sigmoid())
            model = Net()
            opt = torch.optim.SGD([{"params": model.encoder.parameters()},
                                   {"params": model.gate.parameters()},
                                   {"params": model.head.parameters(), "lr": 0.1}], lr=0.01)
            """),
    ]

    def visit_List(self, node: ast.List, ctx: Context) -> Iterator[Finding]:
        s = ctx.statement
        if isinstance(s, ast.AugAssign) and s.value is node and isinstance(s.target, ast.Name):
            yield from self._grown(s.target.id, ctx)  # `groups += [{'params': ...}]`
            return
        yield from self._check(node, ctx)

    def _grown(self, name: str, ctx: Context) -> Iterator[Finding]:
        """The optimizer built from the local list ``name`` that the function grows group by
        group (``groups = []``, ``groups += [{...}]``, ``SGD(groups)``), checked once."""
        scope = ctx.scope()
        s = ctx.statement
        seen: set[int] = ctx.memo("gt462-grown", ctx.tree, set)
        for n in walk(scope.node):
            if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name) \
                    and n.args[0].id == name and s is not None and n.lineno > s.lineno \
                    and is_optimizer_call(n, ctx):
                if id(n) not in seen:
                    seen.add(id(n))
                    items = _grown_list(name, n, ctx)
                    if items:
                        yield from self._check(n, ctx, items=items)
                return

    def visit_Tuple(self, node: ast.Tuple, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        """``list(a.x.parameters()) + list(a.y.parameters()) + ...`` (the outermost sum)."""
        parent = ctx.parent
        if isinstance(node.op, ast.Add) and not (isinstance(parent, ast.BinOp)
                                                 and isinstance(parent.op, ast.Add)):
            yield from self._check(node, ctx)

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        """# NOTE [one part per optimizer]: ``Adam(self.vae.encoder.parameters())`` in a function
        that builds several optimizers (one per part): the part's siblings that the held
        model runs need an optimizer too."""
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("append", "extend") \
                and isinstance(f.value, ast.Name):
            yield from self._grown(f.value.id, ctx)
        if not node.args or not is_optimizer_call(node, ctx) \
                or isinstance(node.args[0], ast.Name):
            return
        part = _part(node.args[0])
        if part is None or not part[0].startswith("self.") or part[0].count(".") != 1:
            return
        fn = ctx.scope().node
        alone = sum(isinstance(n, ast.Call) and is_optimizer_call(n, ctx) for n in walk(fn)) < 2
        yield from self._check(node, ctx, single=True, alone=alone)  # NOTE [one part per optimizer]

    def _check(self, node: ast.List | ast.Tuple | ast.BinOp | ast.Call, ctx: Context,
               single: bool = False, items: list[ast.expr] | None = None, alone: bool = False
               ) -> Iterator[Finding]:
        parts = [_group_part(e) for e in (items or _items(node))] if not single else \
            [_part(node.args[0])]  # type: ignore[union-attr]
        if items and None in parts:
            return  # a grown list: every group must name its part
        recvs = {p[0] for p in parts if p is not None}
        if len(recvs) != 1 or sum(p is not None for p in parts) < (1 if single else 2):
            return
        named = [p for p in parts if p is not None]
        if len(set(named)) < len(named):
            return  # a part listed twice: GT435's
        recv = recvs.pop()
        scope = ctx.scope()
        fn = scope.node
        if isinstance(scope.statement_of(node), ast.Return) and unread_member(ctx, fn) \
                and not any(isinstance(n, ast.Call) and is_optimizer_call(n, ctx)
                            for n in walk(fn)):
            return  # groups returned by a property nothing reads reach no optimizer
        listed: set[str] = set()
        for n in walk(fn):
            if isinstance(n, ast.Attribute) and dotted(n.value) == recv \
                    and not isinstance(n.ctx, ast.Store):
                listed.add(n.attr)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in WHOLE and _prefix(dotted(n.func.value), recv):
                return  # `model.parameters()` for groups over `model.module.<part>`
        mine = {a for p in parts if p is not None for a in p[1:]}
        for cls in self._classes(recv, node, listed, ctx, single):
            # a learner class holds its own optimizers and freezes: what the script around it
            # does with the parts (snapshots, measurements) is not read
            handled = _handled_attrs(ctx, None if cls.is_module else cls.node) - mine
            learner = ctx.analysis.class_of(fn) if alone else None
            if learner is not None and not learner.is_module:  # the learner and the model
                # decide what trains; the script's snapshots of a part are not read
                handled = (_handled_attrs(ctx, learner.node)
                           | _handled_attrs(ctx, cls.node)) - mine
            attrs = _trainable_attrs(cls, ctx)
            if not {p[1] for p in parts if p is not None} <= set(attrs) \
                    or alone and not _freezes_a_part(cls):  # NOTE [parts the model freezes]
                continue
            if not cls.is_module:  # a learner: only the parts whose parameters it reads
                listed = {n.func.value.attr for n in walk(fn) if isinstance(n, ast.Call)
                          and isinstance(n.func, ast.Attribute) and n.func.attr in PARAM_ITERS
                          and isinstance(n.func.value, ast.Attribute)
                          and dotted(n.func.value.value) == recv}
            held = _held(cls, {p[1] for p in parts if p is not None})
            missing = [a for a in attrs if a not in listed and a not in handled
                       and a not in held
                       and (_used(cls, a, fn, ctx) if cls.is_module
                            else _run_for_backward(cls, a, ctx))]
            if missing and not read_by_index(ctx, scope.statement_of(node)):
                stmt = scope.statement_of(node) or node  # NOTE [list read by index]
                where = attrs[missing[0]]
                names = sorted({p[1] for p in parts if p is not None})
                yield self.report(stmt, ctx, related=[Related(
                    ctx.path, where.lineno, f"`{missing[0]}` is built here", ctx.column(where))],
                    listed=", ".join(f"`{n}`" for n in names), cls=cls.name,
                    missing=missing[0], line=where.lineno)
                return

    @staticmethod
    def _classes(recv: str, node: ast.AST, listed: set[str], ctx: Context,
                 single: bool = False) -> list[ClassInfo]:
        """The module classes the receiver may be (NOTE in the docstring's limits)."""
        classes = ctx.analysis.classes
        if recv == "self":
            own = ctx.analysis.class_of(ctx.scope().node)
            if own is None:
                return []
            if not own.is_module:  # a learner/agent class holding its networks
                return [own]
            method = ctx.scope().node.name  # type: ignore[attr-defined]
            subs = [c for c in classes.values() if c is not own and own in c.lineage()
                    and not any(method in b.methods for b in c.lineage()
                                if b is not own and own in b.lineage())]
            return [own, *subs]
        if recv.startswith("self.") and recv.count(".") == 1:
            own = ctx.analysis.class_of(ctx.scope().node)
            k = own.attr_kind(recv[5:]) if own is not None else None
            if k is not None and k.what == MODULE and k.cls in classes:
                return [classes[k.cls]]  # type: ignore[index]
            if single:
                return []
        k = ctx.analysis.kind(ast.Name(id=recv), ctx.scope(), node.lineno) \
            if "." not in recv else None
        if k is not None and k.what == MODULE and k.cls in classes:
            return [classes[k.cls]]  # type: ignore[index]
        made = {n.func.id for n in walk(ctx.tree) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name) and n.func.id in classes}
        fits = [c for c in classes.values() if c.is_module and c.name in made
                and listed & set(_trainable_attrs(c, ctx))]
        return fits if len(fits) == 1 else []


def _grown_list(name: str, call: ast.Call, ctx: Context) -> list[ast.expr]:
    """The groups of a list the function grows before handing it to the optimizer ``call``:
    ``groups = []`` then ``groups += [{'params': m.neck.parameters()}]`` /
    ``groups.append({...})`` / ``groups.extend([...])`` (pysot's and SiamCAR's
    ``build_opt_lr``); [] when the list is bound otherwise, read or changed in another way
    before the call, or given to the optimizer after a loop that could add to it unseen."""
    scope = ctx.scope()
    made = [x for x in scope.bindings.get(name, ()) if not isinstance(x.stmt, ast.AugAssign)]
    b = made[0] if len(made) == 1 else None
    if b is None or not isinstance(b.stmt, ast.Assign) or not isinstance(b.value, ast.List) \
            or b.line > call.lineno:
        return []
    items: list[ast.expr] = list(b.value.elts)
    for n in walk(scope.node):
        if not (isinstance(n, ast.Name) and n.id == name) or n is call.args[0] \
                or n.lineno == b.stmt.lineno:
            continue
        if n.lineno > call.lineno:
            continue
        s = scope.statement_of(n)
        if isinstance(s, ast.AugAssign) and s.target is n and isinstance(s.op, ast.Add) \
                and isinstance(s.value, (ast.List, ast.Tuple)):
            items.extend(s.value.elts)
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Attribute) and s.value.func.value is n \
                and len(s.value.args) == 1 and not s.value.keywords:
            arg = s.value.args[0]
            if s.value.func.attr == "append":
                items.append(arg)
                continue
            if s.value.func.attr == "extend" and isinstance(arg, (ast.List, ast.Tuple)):
                items.extend(arg.elts)
                continue
        return []
    if any(isinstance(e, ast.Starred) for e in items) or any(
            scope.loops_of(s) for s in scope.stmts if s.lineno < call.lineno
            and any(isinstance(n, ast.Name) and n.id == name for n in walk(s))
            and not isinstance(s, (ast.For, ast.AsyncFor, ast.While))):
        return []
    return items
