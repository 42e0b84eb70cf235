"""A regression target computed with grad by a model no optimizer trains (a teacher).

# NOTE [teacher target computed with grad]
Feature distillation compares the student's output with a teacher's: ``F.l1_loss(student(x),
clip.encode_image(x))``. Called outside ``torch.no_grad()`` on a teacher whose parameters still
require grad, the target carries the teacher's graph: every backward() runs through the whole
teacher, accumulates gradients in it that no optimizer uses or clears, and pulls the target
towards the student (recognize-anything's CLIP teacher). The finding of parameters in no
optimizer (GT821) sees the gradients and names the optimizer's line, which is right when a
trained layer was left out of the optimizer, not here: the teacher should not get gradients at
all. The run looks at the first calls of the comparison losses (``l1_loss``, ``mse_loss``,
``smooth_l1_loss``, ``huber_loss``, classified apart so that no other call pays for it) whose
input and target both carry a graph, and keeps the leaves the target's graph reaches that the
input's does not, with the statement that bound the target: the first frame, from the loss's
caller up, that holds the target in a local variable of its own (not a parameter), at its last
assignment of that name (a helper's argument is bound by its caller). At the end, when every
parameter of a module that GT821 reports is among one such target's own leaves, the finding
names that statement instead. Not moved: a trained layer left out of the optimizer on the
input side (a projector, an alignment conv), a target computed under ``no_grad`` or detached
(no graph), a target that shares leaves with the input only (a consistency loss between two
views of one model: nothing of its own).
"""
from __future__ import annotations

import sys
import weakref
from types import FrameType
from typing import Any

import torch

from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.soft_target import leaf_vars
from gradtrace.runtime.trace.squeezed_side import bound_site

_CALLS = 8  # comparison-loss calls looked at per session
_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
Tensor = torch.Tensor


def note_target(state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before a comparison loss runs: keep the target's own leaves and its binding line."""
    seen = _BY_STATE.setdefault(state, {"calls": 0, "targets": []})
    if seen["calls"] >= _CALLS or not torch.is_grad_enabled():
        return
    inp = args[0] if args else kwargs.get("input")
    target = args[1] if len(args) > 1 else kwargs.get("target")
    if not (isinstance(inp, Tensor) and isinstance(target, Tensor)) \
            or target.grad_fn is None or inp.grad_fn is None:
        return
    seen["calls"] += 1
    own = leaf_vars(target.grad_fn).keys() - leaf_vars(inp.grad_fn).keys()
    if not own:
        return
    site = _bound_site(target)
    if site is not None:
        seen["targets"].append((frozenset(own), site))


def _bound_site(target: Tensor) -> Site | None:
    f: FrameType | None = sys._getframe(1)
    while f is not None and is_internal(f.f_code):
        f = f.f_back
    return bound_site(f, target, is_internal)


def teacher_target(state: Any, missed: list[Any]) -> tuple[Site, str, str] | None:
    """(site, why, fix) for the finding of parameters in no optimizer (GT821) when ``missed``
    are all among the own leaves of a comparison loss's target; else None."""
    seen = _BY_STATE.get(state)
    ids = {id(p) for p in missed}
    for own, site in (seen["targets"] if seen else ()):
        if ids <= own:
            return (site, "they are reached only through the target of a comparison loss, "
                    "computed here with grad mode on: backward() runs through the model that "
                    "made the target (a teacher) and leaves its gradients unused",
                    "compute the target under `torch.no_grad()` (or `.detach()` it)")
    return None


__all__ = ["note_target", "teacher_target"]
