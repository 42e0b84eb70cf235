"""Values of a helper that carry the graph of what its callers pass, and helpers whose result a
caller differentiates with ``torch.autograd.grad`` (GT605's reach beyond ``backward()``).

# NOTE [passed graph]
A physics or geometry helper (``evaluate_angle_energy(conformer, ...)``) computes from its
arguments with indexing and arithmetic only: ``v = conformer[idx[:, 1]] - conformer[idx[:, 0]]``
requires grad exactly when ``conformer`` does, and the caller passes a tensor that requires
grad (``conformer.detach().requires_grad_(True)``) to take forces with
``torch.autograd.grad(energy, conformer)`` rather than ``backward()``. Both facts are read
from the code: the binding's value is made of subscripts, ``+ - * /``, negation and views of
the function's parameters, and a call of the function precedes, in its caller, a gradient
call (``backward()`` or ``torch.autograd.grad``) that differentiates something.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.grad_values import passed_requiring
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import FUNCTION_TYPES, Context

VIEWS = frozenset({"view", "view_as", "squeeze", "unsqueeze", "permute", "transpose", "t",
                   "reshape", "flatten", "narrow", "select", "expand", "contiguous"})
MAX_DEPTH = 4


def from_passed(ctx: Context, fn: ast.AST, e: ast.expr, line: int, depth: int = 0) -> bool:
    """``e`` (read at ``line`` in ``fn``) is a local computed, through subscripts, arithmetic
    and views only, from a parameter of ``fn`` that the file's callers pass a value requiring
    grad (NOTE [passed graph])."""
    if depth > MAX_DEPTH or not isinstance(fn, FUNCTION_TYPES):
        return False
    if isinstance(e, ast.Subscript):
        return from_passed(ctx, fn, e.value, line, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return from_passed(ctx, fn, e.left, line, depth + 1) or from_passed(
            ctx, fn, e.right, line, depth + 1)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return from_passed(ctx, fn, e.operand, line, depth + 1)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in VIEWS:
        return from_passed(ctx, fn, e.func.value, line, depth + 1)
    if not isinstance(e, ast.Name):
        return False
    b = ctx.scope(fn).binding_before(e.id, line)
    if b is None:
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        return depth > 0 and e.id in params and ctx.memo(
            "passed-graph:" + e.id, fn, lambda: passed_requiring(ctx, fn, e.id) is not None)
    stmt, value = b.stmt, b.value
    if b.no_grad or value is None or not isinstance(stmt, ast.Assign) \
            or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return False
    return from_passed(ctx, fn, value, b.line, depth + 1)


def differentiated_by_caller(ctx: Context, fn: ast.AST | None) -> bool:
    """A call of ``fn`` (by its name) is followed, in the function or module around it, by
    a gradient call that differentiates something (``torch.autograd.grad(energy, x)`` as well
    as ``loss.backward()``)."""
    if not isinstance(fn, FUNCTION_TYPES):
        return False
    for call, s, outer in call_sites(ctx, fn.name):
        if not isinstance(call.func, ast.Name):
            continue
        owner = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)
        if owner is fn:
            continue
        if any(b.loss is not None and b.call.lineno >= call.lineno
               for b in step_calls(ctx, owner).backwards):
            return True
    return False
