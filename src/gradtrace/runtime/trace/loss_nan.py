"""The backward() of the first non-finite loss is hunted for the NaN's origin.

# NOTE [NaN loss hunted]
NOTE [NaN origin] hunts the session's first backward() and the one after an optimizer step saw a
non-finite gradient. A loss that turns NaN later (a batch that divides by a count of zero: an
all-padding micro-batch normalised by its token count, a variance of one sample) is past the first
hunt, and the next hunted pass runs after the step has already written NaN into the weights:
every op then carries NaN in its forward values, and the first node whose backward "turns finite
gradients into NaN" is wherever the graph happens to start (an ``exp`` of NaN logits), not the
division. So, until one is found, each backward() whose one root is a single non-finite number
is hunted the same way (one ``isfinite`` of that number per backward(); the hooks only on that
pass), but only if every leaf of its graph (the hunt's leaves: parameters, inputs that require
grad) is still finite when it starts: a NaN inherited from the weights was born elsewhere, and
that pass is left alone for good. The origin found (``0 / 0``: ``Div``'s backward sends
``1 / 0``) is kept apart from ``state.nan_origin``: it is named only when an optimizer step then
saw a non-finite gradient (``optimizer_events``), after the ``torch.where`` and first-forward
origins and before the later hunt's. A NaN loss whose step the program skips (a GradScaler, an
``isfinite`` guard) reaches no step and names nothing.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.trace.nan_origin import Hunt, _finite

Tensor = torch.Tensor


def _nonfinite_loss(roots: Any) -> bool:
    if len(roots) != 1 or not isinstance(roots[0], Tensor):
        return False
    root = roots[0]
    if root.numel() != 1 or not root.is_floating_point() or root.is_sparse \
            or root.device.type == "meta":
        return False
    with torch._C.DisableTorchFunction(), torch.no_grad():
        return not bool(torch.isfinite(root.detach()).all())


def _leaves_finite(hunt: Hunt) -> bool:
    with torch._C.DisableTorchFunction(), torch.no_grad():
        for ref in hunt.leaves:
            t = ref()
            if t is not None and t.is_floating_point() and t.numel() \
                    and not _finite((t.detach(),)):
                return False
    return True


def loss_hunt(state: Any, func: Any, roots: Any, hunt: Hunt | None) -> Hunt | None:
    """The hunt for this backward(): ``hunt`` (NOTE [NaN origin]'s, or None), or a new one when
    its loss is the first non-finite one and NOTE [NaN loss hunted] applies; marked
    ``loss_nan`` when its origin is to be kept."""
    if state.loss_nan is not None or func is torch.autograd.grad or not _nonfinite_loss(roots):
        return hunt
    state.loss_nan = False  # one pass only, whatever it finds
    if hunt is None:
        try:
            hunt = Hunt(roots)
        except Exception:  # a hunt of ours must never disturb the user's backward
            return None
        hunt.own = True  # type: ignore[attr-defined]
    if _leaves_finite(hunt):
        hunt.loss_nan = True  # type: ignore[attr-defined]
    return hunt


def loss_hunted(state: Any, hunt: Hunt) -> bool:
    """After the hunted pass: keep its origin (line, op) for NOTE [NaN loss hunted]. True when
    the hunt was this NOTE's own (its hooks removed here; nothing of it goes to
    ``state.nan_origin``, which names a NaN even without a step), False for NOTE [NaN origin]'s
    (``end_hunt`` then does its part)."""
    if getattr(hunt, "loss_nan", False) and hunt.origin is not None:
        state.loss_nan = hunt.origin
    if not getattr(hunt, "own", False):
        return False
    hunt.remove()
    return True
