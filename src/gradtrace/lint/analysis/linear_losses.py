"""A loss whose graph saves none of the tensors an optimizer step can change.

# NOTE [a loss linear in its leaves]
A temperature loss ``ent_coef_loss = -self.log_ent_coef * (self.target_entropy -
entropy.detach())`` (SAC's ``-(log_alpha * (log_pi + target).detach()).mean()``) is built
before the policy's ``step()`` and backpropagated after it. Its graph is sums, negations,
means and products: ``add``, ``neg``, ``mean`` and ``sum`` save no tensor, and ``mul``/``div``
save an operand only for the gradient of the other, so a leaf is saved only when it is the
operand of a product whose other factor has a graph. When every product's bare leaf (a name
or attribute not computed in the function, or a ``.detach()`` of one: it shares the leaf's
version counter) meets a factor without a graph, and every other saved operand is the fresh
result of an operation, no tensor the graph saved is one a step changes in place: its
backward runs whatever was stepped (checked on torch 2.13; the twin ``log_alpha ** 2 * c``
saves ``log_alpha`` and raises once it is stepped). :func:`saves_no_step` answers for an
expression of a function read at a line; names bound in the function are followed through
their binding before the line, eight deep; anything else (a call of a model or function, a
power, an index) may save a parameter.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.origins import origins
from gradtrace.lint.analysis.reach import value_of

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

CUTS = frozenset({"detach", "item", "tolist", "numpy"})
REDUCTIONS = frozenset({"mean", "sum"})


def saves_no_step(ctx: Context, scope: Scope, e: ast.expr, line: int,
                  stmt: ast.stmt | None, depth: int = 0) -> bool:
    """Whether the graph of ``e`` (read at ``line``) saves no tensor a step may change
    (NOTE [a loss linear in its leaves])."""
    if depth > 8:
        return False
    if isinstance(e, (ast.Constant, ast.Attribute)):
        return True  # a leaf read is not saved by reading it
    if isinstance(e, ast.Name):
        b = _bound(scope, e.id, line)
        return b is None or value_of(b) is not None and saves_no_step(
            ctx, scope, value_of(b), b.line, b.stmt, depth + 1)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        return saves_no_step(ctx, scope, e.operand, line, stmt, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        if not all(saves_no_step(ctx, scope, x, line, stmt, depth + 1)
                   for x in (e.left, e.right)):
            return False
        if isinstance(e.op, (ast.Add, ast.Sub)):
            return True
        return all(_fresh(scope, x, line, depth) or _graphless(ctx, scope, y, line, stmt, depth)
                   for x, y in ((e.left, e.right), (e.right, e.left)))
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if e.func.attr in CUTS:
            return True  # no graph
        return e.func.attr in REDUCTIONS and _plain_args(e) and \
            saves_no_step(ctx, scope, e.func.value, line, stmt, depth + 1)
    return False


def _bound(scope: Scope, name: str, line: int):  # type: ignore[no-untyped-def]
    """The binding of ``name`` before ``line`` in the function; None for a name it never
    binds before (a parameter, a global)."""
    if not any(b.line < line for b in scope.bindings.get(name, [])):
        return None
    return scope.binding_before(name, line)


def _plain_args(call: ast.Call) -> bool:
    return all(isinstance(a, ast.Constant) for a in call.args) and \
        all(isinstance(k.value, ast.Constant) for k in call.keywords)


def _fresh(scope: Scope, e: ast.expr, line: int, depth: int) -> bool:
    """``e`` is a new tensor an operation made (or a number), not a leaf nor a view of one."""
    if depth > 8:
        return False
    if isinstance(e, (ast.Constant, ast.BinOp, ast.UnaryOp)):
        return True
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
            e.func.attr in CUTS | REDUCTIONS:
        return e.func.attr in REDUCTIONS or _fresh(scope, e.func.value, line, depth + 1)
    if isinstance(e, ast.Name):
        b = _bound(scope, e.id, line)
        v = value_of(b) if b is not None else None
        return v is not None and _fresh(scope, v, b.line, depth + 1)
    return False


def _graphless(ctx: Context, scope: Scope, e: ast.expr, line: int, stmt: ast.stmt | None,
               depth: int) -> bool:
    """``e`` carries no graph: a number, a cut, or what the shared tracer finds dead."""
    if isinstance(e, ast.Constant) or isinstance(e, ast.Call) and \
            isinstance(e.func, ast.Attribute) and e.func.attr in CUTS:
        return True
    if isinstance(e, ast.Name) and depth <= 8:
        b = _bound(scope, e.id, line)
        v = value_of(b) if b is not None else None
        if v is not None and _graphless(ctx, scope, v, b.line, b.stmt, depth + 1):
            return True
    return not origins(ctx, scope.node).trace(e, stmt, line).live
