"""A module carried into a plain object: ``self.<attr> = <parameter>`` in the ``__init__`` of a
class that is no ``nn.Module``, with the module each construction site passes.

# NOTE [carried modules]
A plain class (a predictor, an embedder, a serving component) often receives the network it
runs through its constructor (``PTSPredictor(prediction_network, ...)``) and keeps it on
``self``. What the attribute holds is then what every construction site passes
(NOTE [construction sites]): :func:`carried_module` answers only when the class has exactly
one store to the attribute, in its own ``__init__``, of a parameter that ``__init__`` never
rebinds, no class of the file derives from it (a subclass could build it another way), and
every site of the project is in this file and passes, for that parameter, a value whose kind
is a module. A module keeps the mode it was put in (a new one is in train mode); whether
anything switches it is the rule's question, not this fact's.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.constructed import constructor_values
from gradtrace.lint.analysis.kinds import MODULE, Kind
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


@dataclass(frozen=True)
class Carried:
    """``store`` (``self.<attr> = <param>`` in ``__init__``) and, per construction site, the
    value passed, the function (or module) holding the call, and the value's kind."""

    store: ast.Assign
    attr: str
    sites: tuple[tuple[ast.expr, ast.AST, Kind], ...]


def carried_module(ctx: Context, cls: ClassInfo, attr: str) -> Carried | None:
    """The module ``self.<attr>`` of the plain class ``cls`` holds (NOTE [carried modules])."""
    memo: dict[str, Carried | None] = ctx.memo("carried-modules", cls.node, dict)
    if attr not in memo:
        memo[attr] = _carried(ctx, cls, attr)
    return memo[attr]


def _carried(ctx: Context, cls: ClassInfo, attr: str) -> Carried | None:
    init = cls.methods.get("__init__")
    if cls.is_module or init is None or _derived(ctx, cls):
        return None
    target = "self." + attr
    stores = [n for m in cls.methods.values() for n in walk(m)
              if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
              and any(dotted(t) == target for t in _targets(n))]
    if len(stores) != 1 or not isinstance(stores[0], ast.Assign) \
            or len(stores[0].targets) != 1 or not isinstance(stores[0].value, ast.Name):
        return None
    store, param = stores[0], stores[0].value.id  # type: ignore[union-attr]
    a = init.args
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)[1:]}
    if param not in params or not any(n is store for n in walk(init)) or _rebinds(init, param):
        return None
    values = constructor_values(ctx, cls, param)
    if not values:
        return None
    sites: list[tuple[ast.expr, ast.AST, Kind]] = []
    for sctx, v, where in values:
        if sctx is not ctx:
            return None
        k = ctx.analysis.kind(v, ctx.scope(where), v.lineno)
        if k is None or k.what != MODULE:
            return None
        sites.append((v, where, k))
    return Carried(store, attr, tuple(sites))


def carried_call(ctx: Context, call: ast.Call, fn: ast.AST) -> Carried | None:
    """The carried module (NOTE [carried modules]) that ``call`` runs in the method ``fn``:
    ``self.<attr>(...)`` or ``self.<attr>.forward(...)``."""
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "forward":
        f = f.value
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self"):
        return None
    cls = ctx.analysis.class_of(fn)
    return carried_module(ctx, cls, f.attr) if cls is not None else None


def _targets(n: ast.AST) -> list[ast.expr]:
    if isinstance(n, ast.Assign):
        return list(n.targets)
    return [n.target]  # type: ignore[attr-defined]


def _rebinds(fn: ast.AST, name: str) -> bool:
    """``name`` is assigned in ``fn`` (beyond being its parameter)."""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
               for n in walk(fn))


def _derived(ctx: Context, cls: ClassInfo) -> bool:
    """A class of the file names ``cls`` among its bases."""
    return any(any(dotted(b) == cls.name for b in c.node.bases)
               for c in ctx.analysis.classes.values())
