"""GT75x: non-finite gradients from ops used at their singular points (part of the GT7xx
autograd family: what autograd computes, not what the forward shows).

Autograd differentiates every op that ran, also where a later `torch.where`, `masked_fill` or
clamp throws the value away: the incoming gradient there is 0, the op's own derivative is
infinite (or NaN), and `0 * inf` is NaN (checked op by op on torch 2.13). The rules report only
what the code shows: a guard that tests the very value the singular op consumes, a clamp to
exactly the singular bound, a hand-written norm of a difference, a clamp on the singular op's
output.
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("`sqrt`/`log`/a division of an arbitrary tensor that may reach 0 (a norm of a feature "
     "vector, a variance, a count)",
     "whether the value reaches the singular point depends on the data; see runtime: "
     "gradtrace run (NaN origin)"),
    ("softmax/logsumexp over a row that a padding mask may cover entirely",
     "whether a whole row is masked depends on the batch; see runtime: gradtrace run"),
]
