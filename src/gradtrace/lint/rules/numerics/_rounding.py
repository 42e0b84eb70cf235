"""Whether ``1 - eps`` is exactly 1.0 in a floating dtype, and the value of a small setting
(``1e-8``, ``eps=1e-8``, ``self.eps`` set from such an argument, ``EPS = 1e-8``)."""
from __future__ import annotations

import ast
import struct

from gradtrace.lint.analysis.cuts import self_assignments
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.numerics._bounds import num


def _float32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


def _float16(v: float) -> float:
    return struct.unpack("e", struct.pack("e", v))[0]


def _bfloat16(v: float) -> float:
    bits = struct.unpack("I", struct.pack("f", v))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000   # round to nearest even
    return struct.unpack("f", struct.pack("I", bits))[0]


ROUNDERS = {"float32": _float32, "float16": _float16, "bfloat16": _bfloat16}


def one_minus_is_one(eps: float, dtype: str) -> bool:
    """``1 - eps`` rounds to exactly 1.0 in ``dtype``."""
    return 0 < eps < 1 and ROUNDERS[dtype](1.0 - eps) == 1.0


def _defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
             *zip(a.kwonlyargs, a.kw_defaults)]
    return {arg.arg: d for arg, d in pairs if d is not None}


def _module_constant(ctx: Context, name: str) -> float | None:
    vals = [s.value for s in ctx.tree.body if isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name]
    return num(vals[0]) if len(vals) == 1 else None


def small_setting_value(e: ast.AST, ctx: Context) -> float | None:
    """The value of a positive constant below 1: a number, an argument of the function with
    such a default that it never rebinds, a module constant, or ``self.<x>`` whose every
    assignment in the class is such a number or such an argument of its method (the largest
    of them, the one least likely to round away)."""
    v = num(e)
    if v is not None:
        return v if 0 < v < 1 else None
    fn = ctx.function
    if isinstance(e, ast.Name):
        if fn is not None:
            d = _defaults(fn).get(e.id)
            if d is not None:
                x = num(d)
                return x if x is not None and 0 < x < 1 \
                    and len(ctx.scope().bindings.get(e.id, ())) <= 1 else None
            if e.id in ctx.scope().bindings:
                return None
        x = _module_constant(ctx, e.id)
        return x if x is not None and 0 < x < 1 else None
    name = dotted(e) if isinstance(e, ast.Attribute) else None
    cls = ctx.class_def
    if name is None or cls is None or not name.startswith("self.") or name.count(".") != 1:
        return None
    defaults: dict[str, ast.expr] = {}
    for f in cls.body:
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defaults.update(_defaults(f))
    got = []
    for value in self_assignments(cls, name, ctx):
        if isinstance(value, ast.Name) and value.id in defaults:
            value = defaults[value.id]
        x = num(value)
        if x is None or not 0 < x < 1:
            return None
        got.append(x)
    return max(got) if got else None
