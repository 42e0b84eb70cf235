"""What a generator function of the file hands its caller: the values it yields."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.flow import Scope


def yielded(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.stmt, ast.expr]]:
    """# NOTE [yielded values]
    A generator function (``yield`` with no ``return`` of a value) hands its caller what
    it yields: ``for loss in micro_losses(model, batches):`` reads each ``yield criterion(
    model(x), y).item()``. (statement, value) for each ``yield <value>`` statement of
    ``fn``'s own body (not of a nested function or class), each standing for a return of that
    value; empty when a ``yield`` has no value, or on a ``yield from``."""
    out: list[tuple[ast.stmt, ast.expr]] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.YieldFrom) or isinstance(n, ast.Yield) and n.value is None:
            return []
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Yield):
            out.append((n, n.value.value))  # type: ignore[arg-type]
            continue
        if isinstance(n, ast.Yield):
            return []  # `x = yield v`: a coroutine
        todo.extend(ast.iter_child_nodes(n))
    return out


def generator_call(it: ast.expr, scope: Scope) -> bool:
    """``it`` calls a generator function of the file: a loop over it reads what it yields
    (NOTE [yielded values]), whatever its arguments are called."""
    fn = called_function(it, scope, it.lineno) if isinstance(it, ast.Call) else None
    return fn is not None and bool(yielded(fn))
