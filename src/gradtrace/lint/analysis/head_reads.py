"""Which layers of a module each element of its returned tuple reads, and which elements a
loss reads (NOTE [heads a step skips]).

# NOTE [heads a step skips]
``zero_grad()`` sets every ``.grad`` of its optimizer to None (``set_to_none=True``, the default
since torch 2.0), and every ``torch.optim`` optimizer skips a parameter whose ``.grad`` is
None. A step after ``zero_grad(); loss_a.backward()`` therefore changes only the parameters
``loss_a``'s graph reached. A twin-Q critic ``q1, q2 = critic(s, a)`` whose ``forward``
computes ``q1`` with ``linear1-3`` and ``q2`` with ``linear4-6``: the step after
``q1_loss.backward()`` leaves ``linear4-6`` as they were, so ``q2_loss`` built before it
backpropagates fine (replication-mbpo's SAC, fix37.md). The facts, each an over-estimate so
that "disjoint" is proven:

- :func:`element_layers`: for a module class (of the file or of another file of the project)
  whose ``forward`` ends in ``return a, b`` on every path (no starred element), the
  ``self.<attr>`` each element's value reads through the forward's bindings (every binding
  of a name, wherever it sits). Unknown (None): ``self`` read other than as ``self.<attr>``
  (handed to a call, ``getattr(self, ...)``), an attribute that is a method of the class or
  not assigned exactly once in its ``__init__``, or assigned from another ``self.<attr>``
  (a layer shared under two names), or ``super()`` called.
- :func:`elements_read`: the indices of ``owner``'s returned tuple a value of a function reads,
  through ``x1, x2 = owner(...)`` unpackings; unknown when the owner is read any other way
  (``owner(...)[0]``, handed to a call) or a method of the function's class runs
  (``self.helper()`` may read any layer)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.owners import home
from gradtrace.lint.analysis.project import foreign_class
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import same_block, walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.analysis.update_helpers import Event
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _reached(scope: Scope, e: ast.AST, stop: str | None = None) -> list[ast.AST] | None:
    """``e`` and the values of every binding of every name it reads, transitively (a tuple
    unpacked or a loop target: the whole right-hand side or iterable); a call of ``stop``
    unpacked into names is not followed."""
    out: list[ast.AST] = []
    todo, seen = [e], set()
    while todo:
        n = todo.pop()
        out.append(n)
        for x in walk(n):
            if not (isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)) or x.id in seen:
                continue
            seen.add(x.id)
            for b in scope.bindings.get(x.id, ()):
                s = b.stmt
                v = b.value if b.value is not None else getattr(s, "value", None) if isinstance(
                    s, (ast.Assign, ast.AnnAssign, ast.AugAssign)) else getattr(s, "iter", None)
                if v is None and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.Lambda)):
                    return None  # `with ... as x`, an import...: unknown
                if v is not None and not (stop is not None and isinstance(v, ast.Call) and dotted(
                        v.func) == stop and b.value is None):
                    todo.append(v)
                if isinstance(s, ast.AugAssign):
                    todo.append(s.target)
    return out


def element_layers(ctx: Context, info: ClassInfo) -> list[frozenset[str]] | None:
    """Per element of the tuple ``info``'s ``forward`` returns, the attributes it reads."""
    fwd, init = info.methods.get("forward"), info.methods.get("__init__")
    if fwd is None or init is None or not fwd.args.args:
        return None
    me = fwd.args.args[0].arg
    rets = [r for r in walk(fwd) if isinstance(r, ast.Return)]
    if not rets or any(not isinstance(r.value, ast.Tuple) or len(r.value.elts) != len(
            rets[0].value.elts) or any(isinstance(x, ast.Starred) for x in r.value.elts)
            for r in rets):  # type: ignore[union-attr]
        return None
    scope = ctx.scope(fwd)
    made = _init_attrs(init)
    if made is None:
        return None
    parent = {id(c): n for n in walk(fwd) for c in ast.iter_child_nodes(n)}
    for x in walk(fwd):
        if isinstance(x, ast.Name) and x.id == "super":
            return None  # a base class's forward: layers not listed here
        if isinstance(x, ast.Name) and x.id == me and isinstance(x.ctx, ast.Load):
            up = parent.get(id(x))
            if not isinstance(up, ast.Attribute) or up.attr in info.methods \
                    or up.attr not in made:
                return None  # `self` handed on, a method run, an attribute of unknown origin
    out: list[frozenset[str]] = []
    for i in range(len(rets[0].value.elts)):  # type: ignore[union-attr]
        layers: set[str] = set()
        for r in rets:
            got = _reached(scope, r.value.elts[i])  # type: ignore[union-attr]
            if got is None:
                return None
            layers |= {x.attr for n in got for x in walk(n) if isinstance(x, ast.Attribute)
                       and isinstance(x.value, ast.Name) and x.value.id == me}
        out.append(frozenset(layers))
    return out


def _init_attrs(init: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str] | None:
    """The attributes ``__init__`` assigns once each from a value reading no other attribute
    of ``self``; None when one is assigned twice or from another (a layer shared)."""
    me = init.args.args[0].arg if init.args.args else "self"
    seen: dict[str, int] = {}
    for s in walk(init):
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            ts = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in ts:
                if isinstance(t, ast.Attribute) and dotted(t.value) == me:
                    seen[t.attr] = seen.get(t.attr, 0) + 1
                    if s.value is not None and any(
                            isinstance(x, ast.Attribute) and dotted(x.value) == me
                            for x in walk(s.value)):
                        return None
    if any(c > 1 for c in seen.values()):
        return None
    return frozenset(seen)


def elements_read(scope: Scope, value: ast.AST, owner: str,
                  methods: frozenset[str]) -> frozenset[int] | None:
    """The indices of ``owner(...)``'s returned tuple ``value`` reads in ``scope`` (see the
    NOTE); None when unknown."""
    got = _reached(scope, value, owner)
    if got is None:
        return None
    for n in got:
        for x in walk(n):
            if isinstance(x, (ast.Name, ast.Attribute)) and dotted(x) == owner:
                return None  # owner read here itself (`owner(x)[0]`, `q = owner(x)`, handed on)
            if isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and dotted(
                    x.func.value) == "self" and x.func.attr in methods:
                return None  # a method of the class: may read any layer
    names = {x.id for n in got for x in walk(n) if isinstance(x, ast.Name)}
    idx: set[int] = set()
    for s in walk(scope.node):
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) \
                and dotted(s.value.func) == owner and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Tuple):
            for i, t in enumerate(s.targets[0].elts):
                if not isinstance(t, ast.Name):
                    return None
                if t.id in names:
                    idx.add(i)
    return frozenset(idx)


def heads_apart(st: Event, later: Event, owner: str, events: list[Event], scope: Scope,
                cls: ast.ClassDef | None, ctx: Context) -> bool:
    """NOTE [heads a step skips]: the step ``st`` changes none of ``owner``'s layers that
    ``later``'s loss saved: its optimizer was cleared to None in the step's block, and every
    backward since reads elements of ``owner``'s tuple whose layers that loss reads none of."""
    opt = dotted(st.optimizer) if st.optimizer is not None else None
    if opt is None or cls is None or later.loss is None:
        return False
    clears = [m for m in scope.method_calls if m.receiver == opt and m.method == "zero_grad"
              and m.stmt.lineno < st.line]
    if not clears:
        return False
    clear = max(clears, key=lambda m: m.stmt.lineno)
    if clear.call.args or any(k.arg != "set_to_none" or not (isinstance(
            k.value, ast.Constant) and k.value.value is True) for k in clear.call.keywords) \
            or not same_block(scope.node, clear.stmt, st.stmt):
        return False
    between = [e for e in events if clear.stmt.lineno < e.line < st.line and e.loss is not None]
    info = _owner_class(owner, cls, ctx)
    hctx = home(ctx, info.node) if info is not None else None
    layers = hctx.memo("head-reads-layers", info.node, lambda: element_layers(
        hctx, info)) if hctx is not None and info is not None else None
    if not between or layers is None:
        return False
    methods = frozenset(m.name for m in cls.body if isinstance(m, DEFS))
    reads = [elements_read(scope, e.loss, owner, methods) for e in [*between, later]]
    if any(not r or max(r) >= len(layers) for r in reads):
        return False
    stepped = {a for r in reads[:-1] for i in r for a in layers[i]}  # type: ignore[union-attr]
    return not stepped & {a for i in reads[-1] for a in layers[i]}  # type: ignore[union-attr]


def _owner_class(owner: str, cls: ast.ClassDef, ctx: Context) -> ClassInfo | None:
    """The module class every assignment of ``owner`` in ``cls`` builds (of the file or of
    another file of the project), None when unknown or two."""
    made = [n.value for n in walk(cls) if isinstance(n, ast.Assign) and len(n.targets) == 1
            and dotted(n.targets[0]) == owner]
    v = made[0] if len(made) == 1 else None
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in (
            "to", "cuda", "cpu", "float", "double", "train"):  # `Net(...).to(device)`
        v = v.func.value
    if not isinstance(v, ast.Call) or not isinstance(f := v.func, (ast.Name, ast.Attribute)):
        return None
    info = ctx.analysis.classes.get(dotted(f) or "") or foreign_class(ctx, f)
    return info if info is not None and info.is_module else None
