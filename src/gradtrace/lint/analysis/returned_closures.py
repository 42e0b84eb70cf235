"""The nested function a factory hands back, run where its result is called.

# NOTE [returned closure]
``train_step = create_trainer(model, opt, loss_fn)`` then ``train_step(batch)``: when every
``return`` of ``create_trainer`` (a function of this file, or of another file of the project:
NOTE [project index]) names a function defined in its own body (``def _update(...): ...;
return _update``), calling the bound name runs that nested function (an ignite-style
``process_function``). The name must be bound once in the caller's scope, to that call.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def handed_back(fn: Fn) -> Fn | None:
    """The function nested in ``fn`` that every ``return`` of ``fn`` names, or None."""
    nested = {s.name: s for s in fn.body if isinstance(s, FUNCTION_TYPES)}
    if not nested:
        return None
    names = set()
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (*FUNCTION_TYPES, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Return):
            if not isinstance(n.value, ast.Name):
                return None
            names.add(n.value.id)
        todo.extend(ast.iter_child_nodes(n))
    return nested.get(names.pop()) if len(names) == 1 else None


def returned_closure(ctx: Context, where: ast.AST, call: ast.Call
                     ) -> tuple[Context, Fn] | None:
    """(its file's context, the nested function) that ``call`` runs when its callee is a
    name bound once in ``where`` to a factory's call (NOTE [returned closure])."""
    from gradtrace.lint.analysis.project import foreign_callee, home
    if not isinstance(call.func, ast.Name):
        return None
    scope = ctx.scope(where)
    bs = scope.bindings.get(call.func.id, ())
    if len(bs) != 1 or not isinstance(bs[0].stmt, ast.Assign) \
            or not isinstance(bs[0].stmt.value, ast.Call):
        return None
    made = bs[0].stmt.value
    got = resolve(ctx, where, made)
    if got is not None:
        fctx, factory = ctx, got[0]
    else:
        other = foreign_callee(ctx, made, scope, made.lineno) \
            if isinstance(made.func, (ast.Name, ast.Attribute)) else None
        if not isinstance(other, FUNCTION_TYPES):
            return None
        fctx, factory = home(ctx, other), other
    inner = handed_back(factory)
    return (fctx, inner) if inner is not None else None
