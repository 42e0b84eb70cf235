"""A difference of a tensor and another name for the same memory: identically zero.

# NOTE [difference of a tensor with itself]
``cur_param = saved_param[:n_units]`` then ``(cur_param - saved_param) ** 2`` (Avalanche's EWC
penalty slicing the saved copy instead of the current parameter): the slice covers the whole
tensor, so both operands are the same elements in the same memory, the difference is zero
everywhere, and a penalty built on it neither costs anything nor sends a gradient anywhere; the
regulariser is off and training looks normal. The same run-time fact covers ``p - p_old`` where
``p_old`` was saved as a reference to the parameter instead of a copy (L2-SP, EWC, SI anchors;
a convergence test ``(w - w_prev).norm()`` on an alias), and ``a[..., k] - a[..., k]`` written
with the same index twice.

Run-time facts, no per-op work beyond the ``add``/``sub`` calls the mode already classifies
(``COMBINE``, NOTE [dead loss term]): a ``sub`` made by the user's own line (not a library's)
of two floating tensors with at least one element, the same ``requires_grad`` (``x -
x.detach()``, the straight-through / DiCE trick whose value is meant to be zero, differs
there), where one operand is the other or a view of it (``_base``) or both are views of one
base, and they have the same shape, strides and first element's address: every element is
subtracted from itself. Named: the statement that bound the operand that is a view of the
other (in the first frame holding it in a local of its own), else the difference's line; once
per line, reported at the end of a run that called backward(). Silent: a slice shorter than
the tensor (``x[:n] - x`` with another shape), shifted slices (``x[1:] - x[:-1]``), a copy
(``p - p_old`` with ``p_old = p.detach().clone()``), ``x - x.detach()``.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site, called_by_library, user_frame
from gradtrace.runtime.trace.squeezed_side import bound_site

CODE = "GT902"
_SUBS = frozenset({"sub", "__sub__", "__rsub__", "subtract"})
_SITES = 8
_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
Tensor = torch.Tensor


def note_self_difference(state: Any, name: str, a: Any, b: Any) -> None:
    """From NOTE [dead loss term]'s ``COMBINE`` branch: remember a difference of one memory."""
    if name not in _SUBS or not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        return
    base_a, base_b = a._base, b._base
    if not (a is b or base_a is b or base_b is a
            or (base_a is not None and base_a is base_b)):
        _note_apart(state)
        return
    if a.requires_grad != b.requires_grad or a.shape != b.shape or a.numel() == 0 \
            or not a.is_floating_point() or a.stride() != b.stride() \
            or a.data_ptr() != b.data_ptr() or called_by_library(1):
        return
    rec = _BY_STATE.get(state)
    if rec is None:
        rec = _BY_STATE[state] = _Seen()
    if len(rec.sites) >= _SITES:
        return
    frame = user_frame(1)
    if frame is None:
        return
    here = Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    if any(here == at for at, _ in rec.sites.values()):
        return
    view = a if base_a is b else b if base_b is a else None
    bound = None if view is None else bound_site(frame, view)
    rec.sites[bound or here] = (here, bound is not None)


class _Seen:
    """The differences of one memory seen in a run, and the lines seen subtracting two
    memories afterwards (NOTE [a line that also subtracts apart])."""

    __slots__ = ("sites", "apart", "budget")

    def __init__(self) -> None:
        self.sites: dict[Site, tuple[Site, bool]] = {}
        self.apart: set[Site] = set()
        self.budget = _APART_CHECKS


# NOTE [a line that also subtracts apart]
# ``max((g - gathered[0]).abs().max() for g in gathered)``: the first pass subtracts
# ``gathered[0]`` from itself, the next ones two tensors; a pair of corners that is sometimes
# one corner twice. The line is not a difference of a tensor with itself, it met one. Once a
# difference of one memory has been seen, the next ``_APART_CHECKS`` differences of the user's
# own lines are placed (a frame lookup each, nothing before the first one is seen), and a line
# seen subtracting two memories is not reported.
_APART_CHECKS = 256


def _note_apart(state: Any) -> None:
    rec = _BY_STATE.get(state)
    if rec is None or rec.budget <= 0 or called_by_library(2):
        return
    rec.budget -= 1
    frame = user_frame(2)
    if frame is not None:
        rec.apart.add(Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))


def self_diff_findings(state: Any) -> list[Finding]:
    """GT902 for each difference of one memory with itself (see the NOTE)."""
    rec = _BY_STATE.pop(state, None)
    if rec is None or not rec.sites or state.backward_count == 0:
        return []
    seen = {k: v for k, v in rec.sites.items() if v[0] not in rec.apart}
    from gradtrace.runtime.build import make

    out = []
    for site, (at, bound) in seen.items():
        what = ("this statement makes a view of the whole tensor it is later subtracted from "
                f"(line {at.line})" if bound else
                "this difference subtracts a tensor from itself (the same memory under two "
                "names)")
        out.append(make(
            CODE, site,
            f"{what}: every element meets itself, so the difference is zero everywhere and "
            "nothing built on it (a penalty, a distance, a residual) has a value or a gradient",
            fix="subtract the other tensor meant here (the current parameter, a saved copy made "
                "with `.detach().clone()`), not a view or alias of the same one",
            related=[(at, "the difference")] if bound else [], severity="warning"))
    return out


__all__ = ["CODE", "note_self_difference", "self_diff_findings"]
