"""# NOTE [rectified values]: a value that is exactly zero wherever its input is not positive,
so that a whole row of it can be exactly 0.

The output of a ReLU: ``F.relu(x)``, ``torch.relu(x)``, ``x.relu()``, ``x.clamp(min=0)``
(``clamp_min(0)``, ``torch.clamp(x, min=0)``), an ``nn.ReLU`` module called (a name or a
``self`` attribute, also built with ``.to(device)``), or an ``nn.Sequential`` whose last layer
is one; a name bound once to one of these in the same function. With a few units, a row
whose pre-activations are all negative is all zeros (a dead unit set: RTVC's speaker encoder
with a 4-unit embedding, checked on torch 2.13), and dividing it by its own norm is 0 / 0.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

RELU_FUNCS = frozenset({"torch.relu", "torch.nn.functional.relu", "torch.relu_",
                        "torch.nn.functional.relu6"})
RELU_MODULES = frozenset({"torch.nn.ReLU", "torch.nn.ReLU6",
                          "torch.nn.modules.activation.ReLU"})


def rectified(e: ast.AST, ctx: Context, line: int) -> ast.Call | None:
    """The ReLU call ``e`` is, or the one the name ``e`` was bound to once in the function
    being visited (NOTE [rectified values])."""
    if isinstance(e, ast.Name):
        b = ctx.scope().binding_before(e.id, line)
        if b is None or b.value is None or not isinstance(b.stmt, ast.Assign) \
                or len(b.stmt.targets) != 1:
            return None
        e = b.value
    if not isinstance(e, ast.Call):
        return None
    f = e.func
    q = ctx.qualified_name(f) or ""
    if q in RELU_FUNCS:
        return e
    if isinstance(f, ast.Attribute) and not q.startswith("torch."):
        if f.attr in ("relu", "relu_") and not e.args:
            return e
        if f.attr in ("clamp", "clamp_min", "clip") and _zero_floor(e):
            return e
    if q in ("torch.clamp", "torch.clip", "torch.clamp_min") and _zero_floor(e, 1):
        return e
    if isinstance(f, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind(f, None, e.lineno)
        if k is not None and k.what == MODULE and (k.cls or "") in RELU_MODULES:
            return e
        if k is not None and k.what == MODULE and k.cls == "torch.nn.Sequential" \
                and isinstance(k.node, ast.Call) and k.node.args \
                and isinstance(k.node.args[-1], ast.Call) \
                and (ctx.qualified_name(k.node.args[-1].func) or "") in RELU_MODULES:
            return e
    return None


def _zero_floor(call: ast.Call, first: int = 0) -> bool:
    """``clamp(min=0)`` / ``clamp(0)`` / ``clamp_min(0)`` with no upper bound below 0."""
    low = next((k.value for k in call.keywords if k.arg == "min"),
               call.args[first] if len(call.args) > first else None)
    return isinstance(low, ast.Constant) and not isinstance(low.value, bool) \
        and low.value == 0
