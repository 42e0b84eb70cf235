"""GT3xx: leaf tensors and `requires_grad` (rebinding, in-place updates, non-leaf weights).

The rules live in :mod:`.updates` (GT301-GT302), :mod:`.flags` (GT303-GT304) and
:mod:`.nonleaf` (GT305-GT307), :mod:`.name_filters` (GT308), :mod:`.tied_load` (GT309); shared facts in :mod:`._tensors`.
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("`.to(device)` / `.cuda()` on a leaf when the tensor may already be on that device",
     "a move to the same device or dtype returns the leaf itself, so whether the result is a "
     "non-leaf depends on runtime values; see runtime: gradtrace run"),
    ("an in-place update of a parameter inside a helper whose callers hold `no_grad`",
     "the grad mode at the call site is not visible in the helper; see runtime: gradtrace run"),
    ("`.grad` read from a tensor made in another function or module",
     "whether it is a leaf depends on how it was built; see runtime: gradtrace run"),
]
