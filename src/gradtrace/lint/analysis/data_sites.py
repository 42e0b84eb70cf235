"""The calls that hand a function's parameter its values, for the data reading of the tracer.

# NOTE [calls handing data]
:func:`~gradtrace.lint.analysis.origins.given_data` reads a parameter as data when every call
of its function hands a value with no graph. Three facts widen what a call is known to hand:

* a call made with grad off (``with torch.no_grad(): u = normalize_u(w @ v)``) hands no graph,
  whatever its argument holds: the function's operations on it record nothing there;
* a function nested in another function is called only from the one holding it (or from its
  other nested functions): those calls are all of its calls, when its name is used nowhere
  but as a callee there (a nested ``angular_distance(theta, ...)`` called twice in
  ``target(theta, phi)``, itself called on a grid of coordinates);
* a variable a nested function reads from the function holding it (a closure variable) is
  what it is there: :func:`closure_owner` names that function, whose tracer reads it.

A power iteration's ``normalize_u``/``normalize_v`` called on detached weights or under
``torch.no_grad()``, a closed-form target evaluated on ``torch.linspace`` coordinates: data,
so a NaN filtered or an ``acos`` clamped there is never differentiated.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def holder(ctx: Context, fn: ast.AST) -> ast.AST | None:
    """The function whose body holds the function ``fn`` (``if``/``with`` blocks between
    them), or the module for a function defined under a module-level block; None for a
    method, a top-level function, or a function of another file."""
    parents = file_parents(ctx)
    up = parents.get(id(fn))
    if up is None or up is ctx.tree:
        return None
    while up is not None and not isinstance(up, (*_FUNCS, ast.ClassDef, ast.Lambda)):
        up = parents.get(id(up))
    if isinstance(up, (ast.ClassDef, ast.Lambda)):
        return None
    return ctx.tree if up is None else up


def closure_owner(ctx: Context, fn: ast.AST, name: str) -> ast.AST | None:
    """The function (or the module) that ``name``, read free in the nested function ``fn``,
    belongs to: the first holder of ``fn`` binding it or taking it as a parameter
    (NOTE [calls handing data]); None when unknown (a ``nonlocal``/``global`` write, a class)."""
    node = fn
    for _ in range(4):
        up = holder(ctx, node)
        if up is None:
            return None
        if up is ctx.tree:
            return up
        a = up.args  # type: ignore[attr-defined]
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                  if x is not None}
        if name in params or name in ctx.scope(up).bindings:
            return None if _rebound_inside(up, name) else up
        node = up
    return None


def _rebound_inside(fn: ast.AST, name: str) -> bool:
    return any(isinstance(n, (ast.Nonlocal, ast.Global)) and name in n.names for n in walk(fn))


def nested_sites(ctx: Context, fn: ast.AST) -> list[tuple[ast.Call, ast.AST]] | None:
    """Every call of the nested function ``fn`` with the function making it: the calls of
    its name in the function holding it and in that function's nested functions; None when
    ``fn`` is not nested in a function, its name is bound twice there, or used but as a
    callee (returned, handed on, stored)."""
    up = holder(ctx, fn)
    if up is None or up is ctx.tree or not isinstance(fn, _FUNCS):
        return None
    name = fn.name
    defs = [n for n in walk(up) if isinstance(n, (*_FUNCS, ast.ClassDef)) and n.name == name]
    if defs != [fn] or name in ctx.scope(up).bindings and any(
            b.stmt is not fn for b in ctx.scope(up).bindings[name]):
        return None
    called: set[int] = set()
    calls: list[ast.Call] = []
    for n in walk(up):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name:
            called.add(id(n.func))
            calls.append(n)
    if any(isinstance(n, ast.Name) and n.id == name and id(n) not in called
           and isinstance(n.ctx, ast.Load) for n in walk(up)):
        return None
    return [(c, _maker(ctx, c, up)) for c in calls]


def _maker(ctx: Context, call: ast.Call, top: ast.AST) -> ast.AST:
    parents = file_parents(ctx)
    up = parents.get(id(call))
    while up is not None and up is not top and not isinstance(up, _FUNCS):
        up = parents.get(id(up))
    return top if up is None else up


def grad_off_call(ctx: Context, call: ast.Call, where: ast.AST) -> bool:
    """``call`` runs with grad off in ``where`` (a ``no_grad`` block or decorator)."""
    return ctx.scope(where).grad_off_at(call) is not None
