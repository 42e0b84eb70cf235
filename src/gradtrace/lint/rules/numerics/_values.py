"""Values of simple arithmetic of one name, and the values where an op is singular (GT751
judges a guard on ``x`` protecting ``sqrt(1 - x ** 2)`` by trying points of ``x`` beyond the
guard's bound)."""
from __future__ import annotations

import ast

BOUNDED = frozenset({"acos", "arccos", "asin", "arcsin", "atanh", "arctanh"})
# ops whose value lies in [-1, 1] whatever their input (a cosine of two vectors, a squashing
# activation): nothing downstream of one of them sees a large magnitude
UNIT_RANGE = frozenset({"cosine_similarity", "tanh", "hardtanh", "softsign", "sin", "cos",
                        "erf", "sigmoid", "softmax"})


ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
         ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b}
OFFSETS = (0.0, 1e-6, 1e-3, 0.5, 1.0)  # near the bound: the name's own range is unknown


def value_of(e: ast.AST, name: str, x: float) -> float | None:
    """``e`` (arithmetic of the one name ``name`` and numbers) at ``name = x``."""
    if isinstance(e, ast.Name):
        return x if e.id == name else None
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
            and not isinstance(e.value, bool):
        return float(e.value)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = value_of(e.operand, name, x)
        return None if v is None else -v
    if isinstance(e, ast.BinOp) and type(e.op) in ARITH:
        a, b = value_of(e.left, name, x), value_of(e.right, name, x)
        if a is None or b is None:
            return None
        try:
            v = ARITH[type(e.op)](a, b)
        except (ZeroDivisionError, OverflowError, ValueError):
            return float("nan")
        return v if isinstance(v, float) or isinstance(v, int) else float("nan")
    return None


def singular_value(op: str, v: float) -> bool:
    """Whether ``op`` is singular (infinite or NaN derivative) at the value ``v``."""
    if v != v:  # NaN: the operand itself is undefined there
        return True
    if op in ("sqrt", "rsqrt", "pow", "float_power", "**", "log", "log2", "log10"):
        return v <= 0
    if op == "reciprocal":
        return v == 0
    if op == "log1p":
        return v <= -1
    if op in BOUNDED:
        return abs(v) >= 1
    if op in ("acosh", "arccosh"):
        return v <= 1
    if op == "logit":
        return v <= 0 or v >= 1
    return False
