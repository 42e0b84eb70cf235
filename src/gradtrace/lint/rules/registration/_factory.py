"""GT438 through a factory (NOTE [module built by a factory]).

# NOTE [module built by a factory]
``model = build_model(cfg)`` / ``net = create_net()`` where the function (of the file, or of
another file of the project: NOTE [project index]) returns a module of one class of the
project on every ``return`` (:func:`~gradtrace.lint.analysis.built_classes.built_class`) is
read by GT438 as a construction of that class, with the class's own facts read in its own
file (does it own parameters, does it freeze, load or evaluate itself). The factory chain is
part of what is read: a factory (or a function it calls, three calls down) that freezes,
loads weights into or evaluates what it builds (``requires_grad``, ``load_state_dict``,
``torch.load``, ``from_pretrained``, ``eval(``) hands a module kept fixed on purpose: silent.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.built_classes import built_class
from gradtrace.lint.analysis.project import foreign_def
from gradtrace.lint.rules.leaf._tensors import node_mentions

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Def = (ast.FunctionDef, ast.AsyncFunctionDef)
MAX_HOPS = 3


def factory_built(call: ast.Call, ctx: Context, scope: Scope, line: int,
                  keeps_fixed: tuple[str, ...]) -> tuple[Context, ast.Call] | None:
    """(the class's file context, a bare constructor call of the class) when ``call`` runs a
    factory of the project that returns one module class and keeps nothing fixed."""
    got = _function(ctx, call.func, scope, line)
    if got is None:
        return None
    built = built_class(ctx, call)
    if built is None or not built[1].is_module \
            or _keeps_fixed(got[0], got[1], keeps_fixed, 0, set()):
        return None
    octx, cls = built
    return octx, ast.Call(func=ast.Name(cls.node.name, ast.Load()), args=[], keywords=[])


def _function(ctx: Context, func: ast.expr, scope: Scope | None, line: int
              ) -> tuple[Context, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The function of the file or the project ``func`` names (not a local name)."""
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id == "self":
        return None
    if scope is not None:
        b = scope.binding_before(root.id, line)
        if b is not None and not isinstance(b.stmt, (*Def, ast.Import, ast.ImportFrom)):
            return None
    if isinstance(func, ast.Name):
        fn = ctx.analysis.functions.get(func.id)
        if fn is not None:
            return ctx, fn
    got = foreign_def(ctx, func)
    if got is None or not isinstance(got[1], Def):
        return None
    return got[0], got[1]  # type: ignore[return-value]


def _keeps_fixed(ctx: Context, fn: ast.AST, words: tuple[str, ...], hops: int,
                 seen: set[int]) -> bool:
    """Whether ``fn`` or a function of the project it calls (``MAX_HOPS`` down) freezes,
    loads or evaluates something; unknown depth counts as keeping fixed."""
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    if node_mentions(ctx, fn, *words):
        return True
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
            got = _function(ctx, n.func, None, 0)
            if got is None:
                continue
            if hops >= MAX_HOPS or _keeps_fixed(got[0], got[1], words, hops + 1, seen):
                return True
    return False
