"""A comparison loss on a straight-through output: the loss meant for the codebook trains the
encoder.

# NOTE [loss on the straight-through output]
``z_q = x + (z - x).detach()`` (the straight-through estimator of a vector quantiser) has the
value of the codebook lookup ``z`` and the gradient of the encoder output ``x``: with respect to
``x`` it is the identity, and ``z`` is behind the ``.detach()``. A codebook loss written on it,
``F.mse_loss(z_q, x.detach())`` (Olaf-World's VQLAM; any VQ-VAE whose straight-through line was
moved above its latent losses), has the right value and no path to the codebook: its gradient
only reaches ``x``, which the detached target already stops, so the codebook is trained by
nothing and the run reports it as cut at the ``.detach()``. The line to change is the loss,
which must compare the lookup itself (``F.mse_loss(z, x.detach())``), not the straight-through.

Run-time facts, no per-op work: a straight-through add is already tagged on its node
(NOTE [difference with its straight-through copy]); the tag now holds the site of the
``.detach()`` it adds. Before one of the comparison losses (``COMPARE``, see
NOTE [teacher target computed with grad]; the first ``_CALLS`` calls), a side whose node is such
a tagged add and an other side without a graph (a detached value, data) keep the loss's line
for that ``.detach()``.
When a parameter got no gradient because of that very cut, the finding names the loss line,
with the straight-through expression as related. Silent: the codebook loss on the lookup (the
fix), the straight-through output fed to a decoder or to a loss against data while the
codebook is trained elsewhere (no parameter starved by the cut), a commitment loss
``F.mse_loss(x, z_q.detach())`` (its graph side is the encoder output, not the tagged add).
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.runtime.frames import Site, user_frame

META_ST = "gradtrace_straight_through"  # a straight-through add's node -> its cut's site
_CALLS = 16
_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
Tensor = torch.Tensor


def note_st_loss(state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Before a comparison loss: keep its line when it reads a straight-through output
    against a value without a graph."""
    seen = _BY_STATE.setdefault(state, {"calls": 0, "losses": {}})
    if seen["calls"] >= _CALLS:
        return
    inp = args[0] if args else kwargs.get("input")
    target = args[1] if len(args) > 1 else kwargs.get("target")
    if not (isinstance(inp, Tensor) and isinstance(target, Tensor)):
        return
    seen["calls"] += 1
    for a, b in ((inp, target), (target, inp)):
        gf = a.grad_fn
        cut_site = None if gf is None or b.grad_fn is not None or b.requires_grad \
            else gf.metadata.get(META_ST) if type(gf).__name__ == "AddBackward0" else None
        if isinstance(cut_site, Site) and cut_site not in seen["losses"]:
            f = user_frame(1)
            if f is not None:
                seen["losses"][cut_site] = Site(f.f_code.co_filename, f.f_lineno,
                                                f.f_code.co_name)


def st_loss_reason(state: Any, cut: Any, code: str, related: tuple[Any, ...]) -> Any:
    """The never-graded reason naming the loss on the straight-through output whose
    ``.detach()`` is ``cut`` (see the NOTE), else None."""
    seen = _BY_STATE.get(state)
    loss = seen["losses"].get(cut.site) if seen else None
    if loss is None:
        return None
    return (code, loss,
            "this loss compares the straight-through output (the identity for its input, the "
            f"lookup only inside `.detach()` at line {cut.site.line}) with a value without a "
            "graph: its gradient reaches the straight-through's input alone, never what is "
            "behind the `.detach()`, so nothing trains it",
            "compare the value before the straight-through (the codebook lookup) with the "
            "detached input", ((cut.site, "the straight-through expression"),) + related)


__all__ = ["META_ST", "note_st_loss", "st_loss_reason"]
