"""Shared facts of the GT45x rules: where a file wraps a model in ``DistributedDataParallel``,
what it wraps, and which names hold the wrapper (NOTE [ddp facts]).

# NOTE [ddp facts]
DDP-ness is decided from the code, never from a name: a call whose qualified name is
``torch.nn.parallel.DistributedDataParallel`` (any import alias), the name or attribute it is
bound to, and the class of this file it wraps (through ``ctx.analysis``: ``DDP(Net().to(r))``,
``model = Net(); model = DDP(model)``). A function parameter holds a wrapper when a call of the
file passes one (``freeze(model)`` after ``model = DDP(...)``).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator

from gradtrace.findings import Related
from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.analysis.defaulted_off import left_false
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import children, walk

DDP_NAMES = frozenset({"torch.nn.parallel.DistributedDataParallel",
                       "torch.nn.parallel.distributed.DistributedDataParallel"})
TRIGGERS = ("DistributedDataParallel",)


@dataclass(frozen=True)
class Wrap:
    """One ``DistributedDataParallel(...)`` call."""

    call: ast.Call
    owner: ast.AST              # the enclosing function (or the module)
    target: str | None          # the dotted name it is bound to (``model``, ``self.model``)
    finds_unused: bool          # find_unused_parameters is (or may be) on
    static_graph: bool          # static_graph is (or may be) on
    off_at: ast.expr | None = None  # the default that leaves find_unused_parameters off

    @property
    def line(self) -> int:
        return self.call.lineno


def _on(call: ast.Call, name: str) -> bool:
    """Whether keyword ``name`` is (or may be) true: present and not the constant False, or
    hidden in ``**kwargs``."""
    for k in call.keywords:
        if k.arg is None:
            return True
        if k.arg == name:
            return not (isinstance(k.value, ast.Constant) and not k.value.value)
    return False


def wraps(ctx: Context) -> list[Wrap]:
    """Every DDP construction of the file, in source order."""
    def make() -> list[Wrap]:
        out: list[Wrap] = []
        targets: dict[int, str] = {}
        stack: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
        while stack:
            owner, n = stack.pop()
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                t = dotted(n.targets[0])
                if t is not None:
                    targets[id(n.value)] = t
            if isinstance(n, ast.Call) and ctx.qualified_name(n.func) in DDP_NAMES and n.args:
                given = next((k.value for k in n.keywords
                              if k.arg == "find_unused_parameters"), None)
                off = left_false(given.id, owner, ctx) if isinstance(given, ast.Name) and \
                    all(k.arg for k in n.keywords) else None  # NOTE [left at a false default]
                out.append(Wrap(n, owner, targets.get(id(n)), off is None and _on(
                    n, "find_unused_parameters"), _on(n, "static_graph"), off))
            inner = n if isinstance(n, FUNCTION_TYPES) else owner
            stack.extend((inner, c) for c in children(n))
        out.sort(key=lambda w: (w.call.lineno, w.call.col_offset))
        return out
    return ctx.memo("gt45-wraps", ctx.tree, make)


def wrapped_at(w: Wrap, ctx: Context) -> tuple[Related, ...]:
    """The wrap as a related location, for a finding placed at the default that leaves
    ``find_unused_parameters`` off (NOTE [left at a false default])."""
    return () if w.off_at is None else (Related(
        ctx.path, w.line, "the model is wrapped here, `find_unused_parameters` given that "
        "default", ctx.column(w.call)),)


def wrapped_class(w: Wrap, ctx: Context) -> ClassInfo | None:
    """The module class of this file that ``w`` wraps, if the code says which."""
    k = ctx.analysis.kind_in(w.call.args[0], w.owner, w.call.lineno)
    if k is None or k.what != MODULE or k.cls is None:
        return None
    cls = ctx.analysis.classes.get(k.cls)
    return cls if cls is not None and cls.is_module else None


def holds_wrapper(name: str, fn: ast.AST, line: int, ctx: Context) -> Wrap | None:
    """The wrap whose result ``name`` (a plain name) holds at ``line`` in ``fn``: bound there
    from the call, or a parameter of ``fn`` that a call of the file passes such a name."""
    by_call = {id(w.call): w for w in wraps(ctx)}
    b = ctx.scope(fn).binding_before(name, line)
    if b is not None:
        v = b.value
        return by_call.get(id(v)) if isinstance(v, ast.Call) else None
    if not isinstance(fn, FUNCTION_TYPES):
        return None
    for owner, call in _calls_of(fn, ctx):
        arg = ctx.analysis.arguments(fn, call).get(name)
        if isinstance(arg, ast.Call):
            w = by_call.get(id(arg))
        elif isinstance(arg, ast.Name):
            w = holds_wrapper(arg.id, owner, call.lineno, ctx) if owner is not fn else None
        else:
            w = None
        if w is not None:
            return w
    return None


def _calls_of(fn: ast.AST, ctx: Context) -> Iterator[tuple[ast.AST, ast.Call]]:
    """(enclosing function or module, call) for the calls of the file that run ``fn``."""
    for owner, call in _all_calls(ctx):
        if ctx.analysis.callee(call, owner) is fn:
            yield owner, call


def _all_calls(ctx: Context) -> list[tuple[ast.AST, ast.Call]]:
    """(enclosing function or module, call) for every call of the file."""
    def make() -> list[tuple[ast.AST, ast.Call]]:
        out: list[tuple[ast.AST, ast.Call]] = []
        stack: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
        while stack:
            owner, n = stack.pop()
            if isinstance(n, ast.Call):
                out.append((owner, n))
            inner = n if isinstance(n, FUNCTION_TYPES) else owner
            stack.extend((inner, c) for c in children(n))
        return out
    return ctx.memo("gt45-calls", ctx.tree, make)  # type: ignore[no-any-return]


def held_wrapper(e: ast.AST, fn: ast.AST, line: int, ctx: Context) -> Wrap | None:
    """The wrap whose result ``e`` holds: a plain name (:func:`holds_wrapper`) or
    ``self.<attr>`` bound to the call in a method of the class around ``fn``."""
    if isinstance(e, ast.Name):
        return holds_wrapper(e.id, fn, line, ctx)
    t = dotted(e)
    if t is None or not t.startswith("self.") or t.count(".") != 1:
        return None
    cls = ctx.analysis.class_of(fn)
    if cls is None:
        return None
    return next((w for w in wraps(ctx) if w.target == t
                 and ctx.analysis.class_of(w.owner) is cls), None) or ctx.memo(
        "gt45-stored-" + t, cls.node, lambda: _stored_wrapper(cls, t, ctx))


def _stored_wrapper(cls: ClassInfo, t: str, ctx: Context) -> Wrap | None:
    """The wrap a class's only ``self.<attr> = <parameter>`` stores, when the file's calls
    of that method pass one (a trainer built with ``Trainer(ddp_model)`` keeps it)."""
    if not wraps(ctx):
        return None
    stores = [(m, n) for m in cls.methods.values() for n in walk(m)
              if isinstance(n, ast.Assign) and any(dotted(x) == t for x in n.targets)]
    if len(stores) != 1 or len(stores[0][1].targets) != 1:
        return None
    m, n = stores[0]
    v = n.value
    if not isinstance(v, ast.Name) or v.id not in {a.arg for a in m.args.args}:
        return None
    got = holds_wrapper(v.id, m, n.lineno, ctx)
    if got is not None or m.name != "__init__":
        return got
    names = [a.arg for a in m.args.args][1:]  # `Trainer(ddp_model)`: the class is called
    for owner, call in _all_calls(ctx):
        if not (isinstance(call.func, ast.Name) and call.func.id == cls.name):
            continue
        bound = {**dict(zip(names, call.args)), **{k.arg: k.value for k in call.keywords}}
        arg = bound.get(v.id)
        if isinstance(arg, ast.Name) and not any(isinstance(a, ast.Starred) for a in call.args):
            got = holds_wrapper(arg.id, owner, call.lineno, ctx)
            if got is not None:
                return got
    return None


def unwrapped(e: ast.AST, fn: ast.AST, line: int, ctx: Context, depth: int = 0
              ) -> Wrap | None:
    """The wrap whose inner module ``e`` (read at ``line`` in ``fn``) is: ``w.module`` of a
    wrapper ``w`` (a name, ``self.<attr>``), a local name bound to it (also as a branch of
    ``a if isinstance(...) else b``), or what a helper, a method or a property of the file
    returns (``self._get_model()``, ``unwrap(model)``, ``self.raw``) (NOTE [ddp facts])."""
    if depth > 2:
        return None
    if isinstance(e, ast.IfExp):
        return unwrapped(e.body, fn, line, ctx, depth) or \
            unwrapped(e.orelse, fn, line, ctx, depth)
    if isinstance(e, ast.Attribute) and e.attr == "module":
        return held_wrapper(e.value, fn, line, ctx)
    if isinstance(e, ast.Name):
        b = ctx.scope(fn).binding_before(e.id, line)
        if b is None or b.value is None:
            return None
        return unwrapped(b.value, fn, b.line, ctx, depth + 1)
    helper = None
    if isinstance(e, ast.Call):
        helper = ctx.analysis.callee(e, fn)
    elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) \
            and e.value.id == "self":  # a property
        cls = ctx.analysis.class_of(fn)
        m = cls.methods.get(e.attr) if cls is not None else None
        if m is not None and any(dotted(d) == "property" for d in m.decorator_list):
            helper = m
    if helper is None:
        return None
    for r in walk(helper):
        if isinstance(r, ast.Return) and r.value is not None:
            w = unwrapped(r.value, helper, r.lineno, ctx, depth + 1)
            if w is not None:
                return w
    return None


def _base_method(cls: ClassInfo, name: str, ctx: Context, depth: int = 0
                 ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """``cls``'s method ``name``, its own or inherited from a class of this file."""
    m = cls.methods.get(name)
    if m is not None or depth > 3:
        return m
    for b in cls.node.bases:
        base = ctx.analysis.classes.get(dotted(b) or "")
        m = _base_method(base, name, ctx, depth + 1) if base is not None else None
        if m is not None:
            return m
    return None


def wrapped_by_earlier_call(attr: str, fn: ast.AST, line: int, ctx: Context) -> Wrap | None:
    """The wrap of ``attr`` made by ``fn`` before ``line``, if none is made again after it
    (below)."""
    w = wrap_reached(attr, fn, 0, line, ctx)
    if w is None or wrap_reached(attr, fn, line, 1 << 30, ctx) is not None:
        return None  # wrapped again after the freeze (ClassyVision after PR #398)
    return w


class _WrapSearch:
    """The walk of :func:`wrap_reached` (an object, not a recursive closure: NOTE [gc])."""

    def __init__(self, attr: str, cls: ClassInfo, by_owner: dict[int, list[Wrap]],
                 ctx: Context) -> None:
        self.attr, self.cls, self.by_owner, self.ctx = attr, cls, by_owner, ctx
        self.seen: set[int] = set()

    def search(self, f: ast.AST, upto: tuple[int, int] | None, depth: int) -> Wrap | None:
        seen, by_owner, attr, cls, ctx = self.seen, self.by_owner, self.attr, self.cls, self.ctx
        if id(f) in seen or depth > 3:
            return None
        seen.add(id(f))
        for w in by_owner.get(id(f), ()):
            if upto is None or upto[0] < w.line < upto[1]:
                if w.target == attr or dotted(_moved(w.call.args[0])) == attr:
                    return w
        here = ctx.analysis.class_of(f) or cls
        for n in walk(f):
            if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Attribute) \
                    or upto is not None and not upto[0] < n.lineno < upto[1]:
                continue
            r = n.func.value
            if isinstance(r, ast.Name) and r.id == "self":
                m = _base_method(cls, n.func.attr, ctx)
            elif isinstance(r, ast.Call) and isinstance(r.func, ast.Name) \
                    and r.func.id == "super" and not r.args:
                m = next((x for b in here.node.bases
                          if (bc := ctx.analysis.classes.get(dotted(b) or "")) is not None
                          and (x := _base_method(bc, n.func.attr, ctx)) is not None), None)
            else:
                continue
            got = self.search(m, None, depth + 1) if m is not None else None
            if got is not None:
                return got
        return None


def _moved(a: ast.AST) -> ast.AST:
    """``a`` without its ``.to()``/``.cuda()``/``.cpu()`` calls."""
    while isinstance(a, ast.Call) and isinstance(a.func, ast.Attribute) \
            and a.func.attr in ("to", "cuda", "cpu"):
        a = a.func.value
    return a


def wrap_reached(attr: str, fn: ast.AST, lo: int, hi: int, ctx: Context) -> Wrap | None:
    """The wrap of ``self.<x>`` (``attr``) that ``fn`` or a method it runs makes, from a
    statement of ``fn`` between lines ``lo`` and ``hi`` (NOTE [wrapped by an earlier method]).

    # NOTE [wrapped by an earlier method]
    A task or trainer class often wraps its model in a setup method and a subclass extends
    that method: ``super().prepare()`` (whose body calls ``self.init_ddp()``, which binds
    ``self.ddp = DistributedDataParallel(self.base_model)``), then freezes
    ``self.base_model``'s trunk (ClassyVision's FineTuningTask, PR #398). The statements of
    ``fn`` before ``line`` that call ``super().m()`` or ``self.m()`` are followed into the
    methods of the file's classes (inherited ones through the bases the file defines, three
    calls deep); a DDP call there whose module argument (through ``.to``/``.cuda``) or whose
    target is ``attr`` is the wrap."""
    cls = ctx.analysis.class_of(fn)
    if cls is None:
        return None
    by_owner: dict[int, list[Wrap]] = {}
    for w in wraps(ctx):
        by_owner.setdefault(id(w.owner), []).append(w)
    if not by_owner:
        return None
    return _WrapSearch(attr, cls, by_owner, ctx).search(fn, (lo, hi), 0)
