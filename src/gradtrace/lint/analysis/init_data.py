"""``self.x`` that the constructor fills with data made from constants.

# NOTE [made in the constructor from data]
A diffusion model keeps its noise schedule on itself: ``self.noise_schedule =
torch.linspace(beta_0, beta_T, T)``, then ``self.diffusion_hyperparams =
compute_hyperparams_given_schedule(self.noise_schedule)`` (a function of another file: ``alpha
= 1 - beta``, a cumulative product, ``torch.sqrt``, returned in a dict), and its ``forward``
reads ``alpha = self.diffusion_hyperparams["alpha"]`` and takes ``(1 - alpha[ts] ** 2).sqrt()``.
The tracer takes ``self.x`` as live (NOTE [attribute origins]), so GT753 read the schedule as
a value gradients flow through (FastDiff, ProDiff: left in unseen20, unseen24, unseen53b).
:func:`init_data_attribute` says ``self.x`` holds no graph when every store of it (the file's
stores, NOTE [attribute origins]) is a plain assignment in the class's own ``__init__`` of a
value :func:`_data` accepts there:

* a constant; a tuple, list, dict, arithmetic, comparison or subscript of data;
* a factory making a tensor without history whatever it is given (:data:`FRESH`:
  ``torch.linspace(b0, bT, T)``, ``torch.zeros_like(h)``; checked on torch 2.13), a
  ``torch.*``/NumPy/``math`` call of data (``requires_grad=`` given, ``nn.Parameter`` and any
  ``torch.nn`` name excluded), a method of data (``.to(d)``);
* a call of a function of the project (this file, or another through the project index)
  whose returns carry nothing when its arguments carry nothing (:func:`.origins.
  argument_returns`), every argument data;
* a local name of ``__init__`` whose every binding there is data; ``self.y`` stored the
  same way (recursion guarded: a cycle is not data);
* a parameter of ``__init__`` that every construction of the class in its file fills with
  data (at its position or by keyword; a default left in place must be data), the class
  named in no other file of the project (another file may build it with a tensor).

Never for a class whose code spells ``requires_grad`` (``torch.zeros(3).requires_grad_()``
is a trainable leaf). Anything else (a parameter of unknown fill, a layer's call,
``self.net(x)``, a global): not known, the attribute stays what the tracer says.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer
    from gradtrace.lint.context import Context

_DEPTH = 12
# :func:`.attr_origins._stores_of`, set when that module loads (no import cycle: it imports
# this one)
STORES_OF: list[Callable[..., object]] = []
# results without history whatever their arguments, `requires_grad=` aside (torch 2.13:
# `torch.linspace(t * 0.1, t, 5)` and `torch.zeros_like(t)` of a `t` requiring grad have no
# grad_fn; `torch.tensor(t)` copies it detached; not `as_tensor` nor `normal`, which keep it)
FRESH = frozenset(f"torch.{n}" for n in (
    "linspace", "logspace", "arange", "zeros", "ones", "empty", "full", "eye", "rand", "randn",
    "randint", "randperm", "tensor", "zeros_like", "ones_like", "empty_like", "full_like",
    "rand_like", "randn_like", "randint_like", "from_numpy", "FloatTensor", "LongTensor"))
_LIBS = ("torch.", "numpy.", "math.")


def init_data_attribute(ctx: Context, cls: ast.ClassDef, stores: list,  # type: ignore[type-arg]
                        tracer_of: Callable[..., Tracer]) -> bool:
    """NOTE [made in the constructor from data]. ``stores``: the file's stores of the
    attribute (``attr_origins._stores_of``), each ``(owner class, (value, statement, method)
    | None)``. ``tracer_of``: :func:`.origins.origins`, handed down (no import cycle)."""
    if _asks_grad(ctx, cls):
        return False  # `self.w = torch.zeros(3).requires_grad_()`: a trainable leaf
    return _stored_data(ctx, cls, stores, _DEPTH, _Seen(tracer_of))


class _Seen(set):  # type: ignore[type-arg]
    """The keys on the walk's path (a recursion guard), and the tracer handed down."""

    def __init__(self, tracer_of: Callable[..., Tracer]) -> None:
        super().__init__()
        self.tracer_of = tracer_of


def _asks_grad(ctx: Context, cls: ast.ClassDef) -> bool:
    """The class's code spells ``requires_grad`` (a keyword, ``requires_grad_()``, a store)."""
    return ctx.memo("init-data-asks-grad", cls, lambda: any(
        isinstance(n, ast.Attribute) and n.attr.startswith("requires_grad")
        or isinstance(n, ast.keyword) and n.arg == "requires_grad" for n in ast.walk(cls)))


def _stored_data(ctx: Context, cls: ast.ClassDef, stores: list,  # type: ignore[type-arg]
                 depth: int, seen: set[object]) -> bool:
    """Every store that may reach an instance of ``cls`` (its own, a subclass's of the file,
    one from outside a class) is a plain assignment of data in ``cls.__init__``; a sibling
    class's store to its own ``self`` is not one."""
    init = next((m for m in cls.body if isinstance(m, FUNCTION_TYPES)
                 and m.name == "__init__"), None)
    if init is None:
        return False
    mine = [s for owner, s in stores if owner is None or _is_sub(ctx, owner, cls)]
    if not mine or any(s is None or s[2] is not init for s in mine):
        return False
    return all(_data(ctx, cls, init, s[0], s[1].lineno, depth, seen) for s in mine)


def _is_sub(ctx: Context, owner: ast.ClassDef, cls: ast.ClassDef, hops: int = 8) -> bool:
    """``owner`` is ``cls`` or a subclass of it in the file (by base names; an attribute
    base, ``pkg.Base``, counts as one when its last name is ``cls``'s)."""
    if owner is cls:
        return True
    if hops <= 0:
        return True  # too deep: assume it may be
    names = {getattr(b, "id", getattr(b, "attr", None)) for b in owner.bases}
    if cls.name in names:
        return True
    tops = ctx.memo("init-data-classes", ctx.tree, lambda: {  # once per file, not per ask
        c.name: c for c in ast.walk(ctx.tree) if isinstance(c, ast.ClassDef)})
    return any(_is_sub(ctx, tops[n], cls, hops - 1) for n in names if n in tops)


def _data(ctx: Context, cls: ast.ClassDef, init: ast.AST, e: ast.AST, line: int,
          depth: int, seen: set[object]) -> bool:
    if depth <= 0:
        return False

    def rec(x: ast.AST) -> bool:
        return _data(ctx, cls, init, x, line, depth - 1, seen)

    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
        return all(rec(x) for x in e.elts)
    if isinstance(e, ast.Dict):
        return all(k is None or rec(k) for k in e.keys) and all(rec(v) for v in e.values)
    if isinstance(e, ast.BinOp):
        return rec(e.left) and rec(e.right)
    if isinstance(e, ast.UnaryOp):
        return rec(e.operand)
    if isinstance(e, ast.Compare):
        return rec(e.left) and all(rec(x) for x in e.comparators)
    if isinstance(e, ast.Subscript):
        return rec(e.value) and rec(e.slice)
    if isinstance(e, ast.Slice):
        return all(x is None or rec(x) for x in (e.lower, e.upper, e.step))
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        return _self_data(ctx, cls, e.attr, depth, seen)
    if isinstance(e, ast.Name):
        return _name_data(ctx, cls, init, e.id, line, depth, seen)
    if isinstance(e, ast.Call):
        return _call_data(ctx, cls, init, e, line, depth, seen)
    return False


def _call_data(ctx: Context, cls: ast.ClassDef, init: ast.AST, e: ast.Call, line: int,
               depth: int, seen: set[object]) -> bool:
    def rec(x: ast.AST) -> bool:
        return _data(ctx, cls, init, x, line, depth - 1, seen)

    if any(k.arg == "requires_grad" or k.arg is None for k in e.keywords) or \
            any(isinstance(a, ast.Starred) for a in e.args):
        return False
    q = ctx.qualified_name(e.func) or ""
    if q in FRESH:
        return True  # a new tensor without history, whatever it was given
    args = all(rec(a) for a in e.args) and all(rec(k.value) for k in e.keywords)
    if not args:
        return False
    root = e.func
    while isinstance(root, ast.Attribute):
        root = root.value
    imported = isinstance(root, ast.Name) and ctx.imports.is_imported(root.id)
    if imported and q.startswith(_LIBS):
        return not q.startswith("torch.nn.") and "Parameter" not in q
    if isinstance(e.func, ast.Attribute) and not imported:
        return rec(e.func.value)  # a method of data: `.to(device)`, `.float()`
    if isinstance(e.func, ast.Name) and e.func.id in ("len", "float", "int", "range",
                                                      "list", "tuple", "dict", "abs"):
        return True
    from gradtrace.lint.analysis.project import foreign_def
    local = next((s for s in ctx.tree.body if isinstance(s, FUNCTION_TYPES)
                  and isinstance(e.func, ast.Name) and s.name == e.func.id), None)
    if local is not None:
        return _argument_data(ctx, local, seen.tracer_of)  # type: ignore[attr-defined]
    got = foreign_def(ctx, e.func)
    return got is not None and isinstance(got[1], (ast.FunctionDef, ast.AsyncFunctionDef)) \
        and _argument_data(got[0], got[1], seen.tracer_of)  # type: ignore[attr-defined]


def _self_data(ctx: Context, cls: ast.ClassDef, attr: str, depth: int,
               seen: set[object]) -> bool:
    key = ("self", id(cls), attr)
    if key in seen:
        return False
    seen.add(key)
    stores = STORES_OF[0](ctx, attr)
    try:
        return bool(stores) and _stored_data(
            ctx, cls, stores, depth - 1, seen)  # type: ignore[arg-type]
    finally:
        seen.discard(key)  # a guard on the path, not a memo: a sibling may ask again


def _name_data(ctx: Context, cls: ast.ClassDef, init: ast.AST, name: str, line: int,
               depth: int, seen: set[object]) -> bool:
    key = ("name", id(init), name)
    if key in seen:
        return False
    seen.add(key)
    try:
        return _name_value(ctx, cls, init, name, depth, seen)
    finally:
        seen.discard(key)


def _name_value(ctx: Context, cls: ast.ClassDef, init: ast.AST, name: str, depth: int,
                seen: set[object]) -> bool:
    a = init.args  # type: ignore[attr-defined]
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    if a.vararg is not None and a.vararg.arg == name or a.kwarg is not None and \
            a.kwarg.arg == name:
        return False
    stores = [n for n in ast.walk(init) if isinstance(n, (ast.Assign, ast.AnnAssign,
                                                          ast.AugAssign, ast.For, ast.With,
                                                          ast.NamedExpr))
              and any(isinstance(t, ast.Name) and t.id == name for t in _targets(n))]
    if params and params[0].arg == name:
        return False  # `self`: the object being built, holding its layers
    if any(p.arg == name for p in params):
        if stores:
            return False
        return _param_data(ctx, cls, init, params.index(next(p for p in params
                                                              if p.arg == name)), name,
                           depth, seen)
    if not stores or any(not isinstance(s, ast.Assign) or len(s.targets) != 1
                         or not isinstance(s.targets[0], ast.Name) for s in stores):
        return False
    return all(_data(ctx, cls, init, s.value, s.lineno, depth - 1, seen)  # type: ignore[union-attr]
               for s in stores)


def _targets(n: ast.AST) -> list[ast.AST]:
    if isinstance(n, ast.Assign):
        out = [x for t in n.targets for x in ast.walk(t)]
    elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
        out = [n.target]
    elif isinstance(n, ast.For):
        out = list(ast.walk(n.target))
    else:
        out = [x for i in n.items if i.optional_vars is not None  # type: ignore[attr-defined]
               for x in ast.walk(i.optional_vars)]
    return out


def _param_data(ctx: Context, cls: ast.ClassDef, init: ast.AST, index: int, name: str,
                depth: int, seen: set[object]) -> bool:
    """Every construction of ``cls`` (all in its own file) fills ``name`` with data."""
    from gradtrace.lint.analysis.callers import holders
    others = holders(ctx, cls.name.encode())
    if others is None or others:
        return False
    a = init.args  # type: ignore[attr-defined]
    pos = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in pos][len(pos) - len(a.defaults):], a.defaults))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    sites = [(c, outer) for c, _, outer in call_sites(ctx, cls.name)
             if isinstance(c.func, ast.Name) and c.func.id == cls.name]
    if not sites or len(sites) != len(call_sites(ctx, cls.name)):
        return False
    for call, outer in sites:
        where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), None)
        if any(isinstance(x, ast.Starred) for x in call.args) or \
                any(k.arg is None for k in call.keywords):
            return False
        given = next((k.value for k in call.keywords if k.arg == name), None)
        if given is None and index - 1 < len(call.args) and index < len(pos):
            given = call.args[index - 1]  # `self` is not passed
        if given is None:
            given = defaults.get(name)
            if given is None or not isinstance(given, ast.Constant):
                return False
            continue
        ocls = next((o for o in reversed(outer) if isinstance(o, ast.ClassDef)), None)
        if where is None or ocls is None or getattr(where, "name", "") != "__init__":
            return False  # built outside a constructor: its argument is not followed
        if not _data(ctx, ocls, where, given, call.lineno, depth - 1, seen):
            return False
    return True


def _argument_data(ctx: Context, fn: ast.AST, tracer_of: Callable[..., Tracer]) -> bool:
    """Every ``return`` of ``fn`` carries nothing when its arguments carry nothing (what
    :func:`.origins.argument_returns` asks, by the tracer handed down: no import cycle)."""
    if not isinstance(fn, FUNCTION_TYPES) or fn.decorator_list or len(fn.body) > 40:
        return False

    def make() -> bool:
        t = tracer_of(ctx, fn, arguments_live=False)
        rets = [s for s in t.scope.stmts if isinstance(s, ast.Return)]
        return bool(rets) and all(s.value is not None and not t.trace(s.value, s, s.lineno).live
                                  for s in rets)
    return ctx.memo("init-data-argument-returns", fn, make)
