"""Whether ``.to(...)`` of a new Parameter asks for the place its tensor already has."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.flow import NEW_TENSOR_FUNCS

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


# NOTE [move to a new layer's weight]: in ``__init__``, ``.to(self.proj.weight)`` with
# ``self.proj = nn.Linear(...)`` built there without ``device=`` / ``dtype=`` asks for the
# layer's device and dtype: the CPU and float32 (unless the file changes the defaults). A
# tensor a constructor made there in float32 (no ``dtype=``, ``dtype=torch.float32``, or a
# ``.float()`` after it) already has both: the move returns the Parameter itself, registered.
def to_new_layer_weight(move: ast.Call, ctx: Context) -> bool:
    if len(move.args) != 1 or move.keywords or ctx.mentions("set_default_dtype"):
        return False
    w = move.args[0]
    fn = ctx.function
    if not (isinstance(w, ast.Attribute) and w.attr in ("weight", "bias")
            and isinstance(w.value, ast.Attribute) and isinstance(w.value.value, ast.Name)
            and w.value.value.id == "self" and fn is not None and fn.name == "__init__"):
        return False
    cls = ctx.analysis.class_of(fn)
    info = cls.attrs.get(w.value.attr) if cls is not None else None
    v = info.value if info is not None and not info.later and info.method is fn else None
    return isinstance(v, ast.Call) and (ctx.call_name(v) or "").startswith("torch.nn.") \
        and not any(k.arg in ("device", "dtype", None) for k in v.keywords) \
        and info.stmt.lineno < move.lineno


def made_of(data: ast.AST, move: ast.Call, ctx: Context) -> tuple[ast.Call, bool] | None:
    """The constructor call that made ``data`` (through its one binding in the function) and
    whether a ``.float()`` follows it (``torch.ones(13, requires_grad=True).float()``)."""
    if isinstance(data, ast.Name) and ctx.function is not None:
        bs = ctx.scope(ctx.function).bindings.get(data.id, ())
        data = bs[0].value if len(bs) == 1 and bs[0].line < move.lineno else None
    cast = False
    while isinstance(data, ast.Call) and isinstance(data.func, ast.Attribute) \
            and data.func.attr in ("float", "requires_grad_") and not data.keywords:
        cast = cast or data.func.attr == "float"
        data = data.func.value
    if isinstance(data, ast.Call) and (ctx.call_name(data) or "") in NEW_TENSOR_FUNCS:
        return data, cast
    return None


def float32_made(data: ast.Call, ctx: Context) -> bool:
    dtype = next((k.value for k in data.keywords if k.arg == "dtype"), None)
    return dtype is None or ctx.qualified_name(dtype) in ("torch.float32", "torch.float")
