"""An adaptive optimizer whose eps is 0 in its parameters' dtype (issue 13).

# NOTE [eps below the dtype]
Adam, AdamW, RMSprop, Adagrad... divide each update by ``sqrt(v) + eps``, computed in the
parameter's dtype. For float16 parameters the default ``eps=1e-8`` is below the smallest
float16 number (6e-8) and rounds to 0: wherever a squared gradient underflows (or is exactly 0,
an embedding row no batch used) the denominator is 0 and the step writes inf/NaN into the
weights, with finite gradients (glide-finetune PR 6: ``AdamW(...)`` on a ``model.half()``). The
run sees the symptom as a non-finite gradient at a later step, whose backward only carries the
NaN of the weights; the cause is the optimizer's line.

Reported (GT858, instead of GT825 at the op where the NaN showed) when the first non-finite
gradient came after a step whose gradients were checked finite (not at step 1), a parameter of
the optimizer is non-finite when the run ends, and its group's float ``eps > 0`` is 0 in its
dtype (bfloat16 keeps 1e-8: only float16-like dtypes trip). Read once, when the run ends.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.trace.wiring import optimizer_built_at


def _underflowing(opt: Any) -> tuple[float, torch.Tensor] | None:
    """(eps, a non-finite parameter of its group) for the first group whose eps is 0 in the
    dtype of one of its non-finite parameters."""
    with torch.no_grad():
        for group in opt.param_groups:
            eps = group.get("eps")
            if not isinstance(eps, float) or eps <= 0:
                continue
            for p in group["params"]:
                if isinstance(p, torch.Tensor) and p.is_floating_point() \
                        and float(torch.tensor(eps, dtype=p.dtype)) == 0.0 \
                        and not bool(torch.isfinite(p).all()):
                    return eps, p
    return None


def eps_underflow(data: Any, rec: Any, step: int, site: Any,
                  name_of: Any) -> Finding | None:
    """GT858 at the optimizer's line (NOTE [eps below the dtype]), else None."""
    opt = rec.ref()
    if opt is None or step < 2:
        return None
    try:
        hit = _underflowing(opt)
    except (RuntimeError, TypeError):
        return None
    if hit is None:
        return None
    eps, p = hit
    kind, dtype = type(opt).__name__, str(p.dtype).replace("torch.", "")
    at = optimizer_built_at(data, rec, opt) or site
    return make("GT858", at, f"{kind}'s eps={eps:g} is 0 in {dtype}, the dtype of "
                f"{name_of(data, p)}: where a squared gradient underflows (or is 0) its update "
                f"divides by zero, so an optimizer step wrote inf/NaN into the weights with "
                f"finite gradients, and the gradients are NaN from optimizer step {step} on",
                fix=f"give {kind} an eps that {dtype} can hold (eps=1e-4), or keep float32 "
                    "weights and train in mixed precision (torch.autocast with a GradScaler)",
                related=[(site, "the NaN gradient reached optimizer.step() here")],
                severity="warning")


__all__ = ["eps_underflow"]
