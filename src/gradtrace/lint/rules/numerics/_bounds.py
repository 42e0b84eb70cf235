"""Constant operands and clamp bounds, read from the code (``x.clamp(0, 1)``, ``-1e-7``)."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.rules.numerics._ops import torch_op

CLAMPS = frozenset({"clamp", "clip", "clamp_", "clip_"})


def num(e: ast.AST | None) -> float | None:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = num(e.operand)
        return -v if v is not None else None
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
            and not isinstance(e.value, bool):
        return float(e.value)
    return None


def bounds(call: ast.Call, ctx: Context) -> tuple[str, ast.AST | None, ast.AST | None] | None:
    """(operand spelling, min, max) of ``clamp``/``clip``/``clamp_min``/``clamp_max``/
    ``minimum``/``maximum`` calls (a bound that is not given is None)."""
    got = torch_op(call, ctx)
    if got is None:
        return None
    op, operand = got
    rest = [a for a in call.args if a is not operand]
    kw = {k.arg: k.value for k in call.keywords}
    if op in CLAMPS:
        lo = kw.get("min", rest[0] if rest else None)
        hi = kw.get("max", rest[1] if len(rest) > 1 else None)
        return op, lo, hi
    if op in ("clamp_min", "clamp_min_", "maximum", "fmax"):
        return op, (rest[0] if rest else kw.get("min")), None
    if op in ("clamp_max", "clamp_max_", "minimum", "fmin"):
        return op, None, (rest[0] if rest else kw.get("max"))
    if op == "nan_to_num":
        return op, kw.get("neginf", ast.Constant(0.0)), kw.get("posinf", ast.Constant(0.0))
    return None
