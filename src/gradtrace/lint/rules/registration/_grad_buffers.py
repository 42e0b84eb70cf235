"""Weights a module class of the file registers as buffers that require grad (GT421).

# NOTE [weights kept as buffers]
Meta-learning code keeps a layer's weights as buffers so that an inner step can replace them
by non-leaf tensors: ``self.register_buffer('weight', to_var(w, requires_grad=True))`` and
yields them from its own ``params()``. A buffer is not a parameter: ``model.parameters()``
never yields it, so an optimizer built over ``model.parameters()`` holds none of these
weights (``ValueError: optimizer got an empty parameter list`` when they are all the model
has; checked on torch 2.13). :func:`grad_buffers` lists them for a class and the file's
module classes it holds (``self.fc1 = MetaLinear(16, 32)``), transitively.
A buffer counts when its value is made to require grad where it is registered: a call given
``requires_grad=True`` (a factory, or a helper of the file), ``.requires_grad_()`` /
``.requires_grad_(True)``, or an ``nn.Parameter(...)``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def _requires(v: ast.AST | None, ctx: Context) -> bool:
    if not isinstance(v, ast.Call):
        return False
    if any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
           and k.value.value is True for k in v.keywords):
        return True
    if isinstance(v.func, ast.Attribute) and v.func.attr == "requires_grad_":
        return not v.args or isinstance(v.args[0], ast.Constant) and v.args[0].value is True
    return (ctx.qualified_name(v.func) or "").endswith("nn.Parameter")


def grad_buffers(ctx: Context, name: str, depth: int = 0) -> list[tuple[str, str, ast.stmt]]:
    """(class, buffer, statement) for each buffer requiring grad in ``name``'s tree."""
    cls = ctx.analysis.classes.get(name)
    if cls is None or depth > 4:
        return []
    out: list[tuple[str, str, ast.stmt]] = []
    for attr, info in cls.attrs.items():
        if info.buffer and _requires(info.value, ctx):
            out.append((name, attr, info.stmt))
        elif isinstance(info.value, ast.Call) and isinstance(info.value.func, ast.Name) \
                and info.value.func.id != name:
            out.extend(x for x in grad_buffers(ctx, info.value.func.id, depth + 1)
                       if x not in out)
    return out
