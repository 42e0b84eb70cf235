"""The dtype a NumPy array is cast to by ``a.astype(dtype)``.

``np.random.rand(3).astype(np.float64)`` (or ``"float64"``, ``float``, ``np.double``) is
float64; ``torch.tensor(a)`` / ``torch.from_numpy(a)`` keep it, so a later ``.float()`` is a
copy (``ToCopyBackward0``, verified on torch 2.13). Any other cast (``np.float32``) is not.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_FLOAT64 = frozenset({"numpy.float64", "numpy.double", "numpy.float_", "float"})
_FLOAT64_TEXT = frozenset({"float64", "double", "f8", "<f8", "float"})


def astype_float64(node: ast.AST, ctx: Context) -> bool | None:
    """For ``a.astype(dtype)``: whether ``dtype`` is float64; None when ``node`` is no cast."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "astype" and len(node.args) == 1):
        return None
    dtype = node.args[0]
    if isinstance(dtype, ast.Constant):
        return dtype.value in _FLOAT64_TEXT
    if isinstance(dtype, ast.Name) and dtype.id == "float":
        return True
    return (ctx.qualified_name(dtype) or "") in _FLOAT64
