"""Module classes of the file whose ``forward`` computes everything it returns with grad off.

# NOTE [grad-off submodule]
``class Tower(nn.Module)`` with ``@torch.no_grad() def forward(self, x): return
self.proj(x)`` (or its body in one ``with torch.no_grad():``) hands back a tensor with no
history, to every caller: grad mode is global state (NOTE [grad-off returns]). A model that
registers ``self.tower = Tower()`` and runs ``self.tower(x)`` in its ``forward`` then gets
the tower's output cut, and nothing the model returns reaches the tower's weights: they
never get a gradient, whatever ``requires_grad`` says (haotian-liu/LLaVA's
``CLIPVisionTower.forward``, run in training by a model that unfreezes or attacks through
it). :func:`off_forward` names that region (the decorator or the ``with`` item) for the class
of a submodule, when the class builds a trainable weight (:func:`~gradtrace.lint.analysis.
grad_values.weighted`) and does not freeze itself when built (NOTE [frozen when built]: a
frozen feature extractor run under ``no_grad`` is the intended shape). NOTE [forward cuts]
reads such a call as a cut at that region.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_off_returns import grad_off_cut
from gradtrace.lint.analysis.grad_values import weighted
from gradtrace.lint.analysis.self_frozen import freezes_itself

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


def off_forward(ctx: Context, holder: ClassInfo, attr: str) -> ast.AST | None:
    """The grad-off region of the ``forward`` of the file's module class that ``self.<attr>``
    of ``holder`` is built from (``self.tower = Tower(...)``, assigned once), or None
    (NOTE [grad-off submodule])."""
    info = holder.attrs.get(attr)
    v = info.value if info is not None and not info.later else None
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)):
        return None
    cls = ctx.analysis.classes.get(v.func.id)
    fwd = cls.methods.get("forward") if cls is not None and cls.is_module else None
    if fwd is None or cls is holder:
        return None
    cut = grad_off_cut(ctx, fwd)
    if cut is None or not weighted(ctx, cls.name, v) or freezes_itself(cls.name, ctx):
        return None
    return cut.node
