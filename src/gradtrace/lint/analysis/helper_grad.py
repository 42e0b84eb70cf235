"""Values that require grad through the file's own helpers, and the callers that pass them.

# NOTE [helper results that require grad]
:func:`grad_values.requires_grad` (NOTE [values that require grad]) knows nothing of a
helper's result. A call of a top-level function of the file whose every ``return`` computes
from one of its parameters through ops that keep the graph (arithmetic, a ``torch.*``
function, a subscript, a method of :data:`grad_values.KEEPS`) requires grad when the argument
given for that parameter does (``sine(fp)`` with ``def sine(f0): return a * torch.cos(f0 * t)``
and ``fp = torch.tensor(660.0, requires_grad=True)``), two helpers deep at most.
:func:`passed_grad` is :func:`grad_values.passed_requiring` with that fact: a call of ``fn``
made with grad enabled passes, for ``param``, a value that requires grad, through the callers'
own parameters (two calls up; a value computed from one through graph-keeping ops, as
``angle * torch.ones(3)``, counts), from a function the file runs with grad enabled.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_values import (
    KEEPS, MAX_HOPS, _torch_op, callers, passed_param, requires_grad, runs_with_grad)
from gradtrace.lint.context import FUNCTION_TYPES
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_HELPERS = 2


def _carried(ctx: Context, fn: ast.AST, e: ast.AST | None, out: set[str], depth: int = 0
             ) -> None:
    """Parameters of ``fn`` that ``e`` computes from through graph-keeping ops."""
    if e is None or depth > 8:
        return
    if isinstance(e, ast.Name):
        a = fn.args  # type: ignore[attr-defined]
        if e.id in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
            out.add(e.id)
    elif isinstance(e, ast.BinOp):
        _carried(ctx, fn, e.left, out, depth + 1)
        _carried(ctx, fn, e.right, out, depth + 1)
    elif isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        _carried(ctx, fn, e.operand, out, depth + 1)
    elif isinstance(e, ast.Subscript):
        _carried(ctx, fn, e.value, out, depth + 1)
    elif isinstance(e, ast.Call):
        f = e.func
        if _torch_op(ctx, e):
            for a in e.args:
                _carried(ctx, fn, a, out, depth + 1)
        elif isinstance(f, ast.Attribute) and f.attr in KEEPS:
            _carried(ctx, fn, f.value, out, depth + 1)


def carried_requiring(ctx: Context, where: ast.AST, e: ast.AST, line: int, depth: int = 0
                      ) -> ast.AST | None:
    """The node a value's gradient comes from, helpers' results included
    (NOTE [helper results that require grad])."""
    src = requires_grad(ctx, where, e, line)
    if src is not None or depth >= MAX_HELPERS or not isinstance(e, ast.Call) \
            or not isinstance(e.func, ast.Name) or ctx.scope(where).grad_off_at(e) is not None:
        return src
    fn = ctx.analysis.functions.get(e.func.id)
    if not isinstance(fn, FUNCTION_TYPES) or ctx.analysis.class_of(fn) is not None:
        return None
    rets = [n for n in walk(fn) if isinstance(n, ast.Return)]
    if not rets or any(isinstance(n, (*FUNCTION_TYPES, ast.Lambda)) and n is not fn
                       for n in walk(fn)):
        return None
    args = ctx.analysis.arguments(fn, e)
    found = None
    for r in rets:
        params: set[str] = set()
        _carried(ctx, fn, r.value, params)
        got = next((g for p in sorted(params) if p in args
                    and (g := carried_requiring(ctx, where, args[p], line, depth + 1))), None)
        if got is None:
            return None
        found = found or got
    return found


def passed_grad(ctx: Context, fn: ast.AST, param: str, hops: int = 0
                ) -> tuple[ast.AST, list[ast.Call], ast.AST] | None:
    """(where the gradient comes from, the calls on the way from the first caller's down to
    ``fn``'s, the function or module making the first of them), as :func:`grad_values.passed_requiring` with helpers' results
    followed."""
    for call, w, arg in callers(ctx, fn, param):
        if ctx.scope(w).grad_off_at(call) is not None:
            continue
        src = carried_requiring(ctx, w, arg, call.lineno)
        if src is not None:
            if runs_with_grad(ctx, w):
                return src, [call], w
            continue
        if hops >= MAX_HOPS or not isinstance(w, FUNCTION_TYPES):
            continue
        p = passed_param(ctx, w, arg, call.lineno)
        params: set[str] = {p} if p is not None else set()
        if p is None and ctx.scope(w).grad_off_at(call) is None:
            _carried(ctx, w, arg, params)  # `angle * torch.ones(3)`: computed from `angle`
        for p in sorted(params):
            got = passed_grad(ctx, w, p, hops + 1)
            if got is not None:
                return got[0], [*got[1], call], got[2]
    return None


# NOTE [divided graph]
# A division kept out by ``torch.where(n > 0, total / n, total)`` still runs where ``n == 0``
# and autograd sends the numerator ``0 * (1 / 0)`` = NaN (pytorch#36923, checked on torch
# 2.13). Most such guards divide counts (a metric, an average of data) and carry no gradient,
# so a division is judged only when its numerator surely requires grad: known where it is
# read (NOTE [values that require grad], a helper's result included), or a parameter of the
# function that its callers pass requiring grad (:func:`passed_grad`).


def sure_numerator(n: ast.AST, ctx: Context, line: int) -> bool:
    """Whether the numerator of the division ``n`` (``a / b``, ``torch.div(a, b)``) surely
    requires grad (NOTE [divided graph])."""
    num: ast.AST | None = None
    if isinstance(n, ast.BinOp):
        num = n.left
    elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
            and not (ctx.qualified_name(n.func) or "").startswith("torch."):
        num = n.func.value  # `a.div(b)`
    elif isinstance(n, ast.Call) and len(n.args) > 1:
        num = n.args[0]  # `torch.div(a, b)`
    if num is None or isinstance(num, ast.Starred):
        return False
    fn = ctx.function or ctx.tree
    if carried_requiring(ctx, fn, num, line) is not None:
        return True
    if not isinstance(fn, FUNCTION_TYPES):
        return False
    p = passed_param(ctx, fn, num, line)
    return p is not None and passed_grad(ctx, fn, p) is not None
