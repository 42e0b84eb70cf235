"""Per-sample values reduced to one number before they are paired with per-sample weights.

# NOTE [reduced before it was paired]
``log_prob_mean = torch.stack(log_probs).mean()`` then ``loss = -torch.sum(log_prob_mean *
returns)``: the product of a mean and a weight vector, summed, is ``mean(log_probs) *
sum(returns)``: every step is weighted by the total return instead of its own, the gradient is
not the REINFORCE gradient (Gymnasium's tutorial). Nothing fails. The walk of the first loss
graphs (:func:`.graph_scan.scan_loss_graph`) looks at each full reduction (``sum``/``mean`` to
one number) whose input is a ``Mul`` of two tensors where one side is itself a full reduction
(``MeanBackward0``/``SumBackward0``) of a tensor of exactly the shape of the other side, and
that other side is a constant (no graph, does not require grad: returns, advantages, weights
per sample). Reducing first threw away the pairing the shapes show was meant; the line of the
inner reduction is named. A product with a scalar constant (a loss weight), with a weight of
another shape, or with a side that has a graph is not looked at. GT861.
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.trace.records import created_site

REDUCTIONS = frozenset({"MeanBackward0", "SumBackward0"})
_KEPT = 4


def check_pairing(state: Any, node: Any) -> None:
    """From the loss-graph walk, on a full reduction ``node`` (see the NOTE)."""
    try:
        child = node.next_functions[0][0]
        if type(child).__name__ != "MulBackward0" or len(state.paired_means) >= _KEPT:
            return
        sides = [n for n, _ in child.next_functions]
    except (AttributeError, IndexError, RuntimeError):
        return
    if len(sides) != 2:
        return
    for i in (0, 1):
        red, other_node = sides[i], sides[1 - i]
        if red is None or other_node is not None or type(red).__name__ not in REDUCTIONS:
            continue
        try:
            other = child._saved_other if i == 0 else child._saved_self
            sizes = tuple(red._saved_self_sym_sizes)
        except (AttributeError, RuntimeError):
            continue
        if other is None or other.requires_grad or other.dim() == 0 or other.numel() < 2 \
                or tuple(other.shape) != sizes:
            continue
        site = created_site(red)[0]
        if site is not None and site not in state.paired_means:
            state.paired_means[site] = (other.numel(), type(red).__name__[:4].lower())


def paired_mean_findings(state: Any) -> list[Finding]:
    """GT861 (see the NOTE)."""
    out: list[Finding] = []
    for site, (n, how) in list(state.paired_means.items()):
        out.append(make("GT861", site,
                        f"these {n} values are reduced to one number here (`{how}`) and then "
                        f"multiplied by {n} per-element weights of the same shape and summed: "
                        "every weight multiplies the reduced value instead of its own element, "
                        f"so the loss is {how}(values) * sum(weights), not the weighted sum",
                        fix="multiply element by element first, then reduce "
                            "(`(values * weights).sum()`)", severity="warning"))
    return out


__all__ = ["REDUCTIONS", "check_pairing", "paired_mean_findings"]
