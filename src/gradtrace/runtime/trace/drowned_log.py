"""A log whose epsilon guard drowns the gradient of a saturated sigmoid (issue 13).

# NOTE [epsilon that drowns a log's gradient]
``torch.log(torch.sigmoid(x) + eps)`` (a BPR, GAN or binary cross-entropy loss written by hand,
or ``log(1 - sigmoid(x) + eps)``) keeps the value finite where the sigmoid underflows, and that
is all it keeps: the derivative with respect to ``x`` is ``s * (1 - s) / (s + eps)``, about ``s
/ eps`` once ``s`` is far below ``eps``, where ``F.logsigmoid(x)`` gives ``1 - s``, about 1. The
elements that are most wrong (a negative item scored far above the positive one, a discriminator
sure of the wrong answer) are pinned at ``-log(eps)`` and send back practically nothing; nothing
fails and the loss only looks high. At the first loss graphs
(:func:`.graph_scan.scan_loss_graph`) the run walks down from the loss through the nodes that
sum, average, negate or scale by a constant (at most 64), to the ``Log`` nodes the loss sums
unweighted (a BPR loss, a GAN generator's ``-log(D(G(z)) + eps)``: the log *is* the per-element
loss), and looks at those whose input is an ``Add`` of a constant (no graph on the other side)
to a sigmoid's output, directly, through order-keeping reshapes, or as ``1 - s``. The log's
saved input is ``v + eps`` and the sigmoid's saved output gives ``v``: the guard is confirmed
small and positive (``0 < log input - v <= 1e-3`` in every element), and the elements where
``v`` is below 1% of the log's input (the gradient scaled down at least a hundredfold) are
counted. Recorded when at least 1% of the elements are drowned; reported at the end of a run in
which an optimizer stepped, at the log's line. Not reported: a guard that never dominates (a
sigmoid that stayed away from 0 and 1), ``F.logsigmoid``, a ``clamp`` of the probabilities (no
``Add``), a log weighted element by element before it is summed (a hand-written focal or binary
cross-entropy, ``y * log(p + eps)``: the epsilon there is the usual guard against NaN, kornia's
focal-loss fix), a log of a softmax (``log(p + eps)`` on a softmax is the usual guard for class
probabilities; its rows are normalised, a class far below the guard is not the one the loss
trains). Its static twin without the guard is GT756.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.trace.records import created_site

CODE = "GT900"
_RESHAPES = frozenset({"ViewBackward0", "SqueezeBackward0", "SqueezeBackward1",
                       "SqueezeBackward2", "UnsqueezeBackward0", "ReshapeAliasBackward0",
                       "UnsafeViewBackward0", "CloneBackward0"})
_COMPLEMENTS = frozenset({"RsubBackward1", "RsubBackward0"})
_GUARD = 1e-3  # largest epsilon taken for a guard
_DROWNED = 0.01  # v / (v + eps) below this: the gradient scaled down at least 100 times
_SITES = 8
_WALK = 64  # nodes walked down from the loss
# nodes through which a log's value reaches the loss unweighted (see the NOTE)
_SUMMED = frozenset({"NegBackward0", "MeanBackward0", "MeanBackward1", "SumBackward0",
                     "SumBackward1", "AddBackward0", "SubBackward0", "RsubBackward1"}) | _RESHAPES
_SCALED = frozenset({"MulBackward0", "DivBackward0"})
_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _graph_inputs(node: Any) -> list[Any]:
    try:
        return [n for n, _ in node.next_functions if n is not None]
    except (AttributeError, RuntimeError):
        return []


def _guarded_sigmoid(add: Any) -> tuple[Any, bool] | None:
    """(the sigmoid node, whether the log reads ``1 - s``) under an ``Add`` of a constant."""
    inputs = _graph_inputs(add)
    if type(add).__name__ != "AddBackward0" or len(inputs) != 1:
        return None
    node, complement = inputs[0], False
    for _ in range(6):
        name = type(node).__name__
        if name == "SigmoidBackward0":
            return node, complement
        if name in _COMPLEMENTS and not complement:
            complement = True
        elif name not in _RESHAPES:
            return None
        below = _graph_inputs(node)
        if len(below) != 1:
            return None
        node = below[0]
    return None


def check_logs(state: Any, root: Any) -> None:
    """From the loss-graph walk (NOTE [epsilon that drowns a log's gradient]): the logs the
    loss sums unweighted, each recorded when its guard drowns the sigmoid's gradient."""
    seen = _BY_STATE.setdefault(state, {})
    todo, visited = [getattr(root, "grad_fn", None)], 0
    while todo and visited < _WALK and len(seen) < _SITES:
        node = todo.pop()
        visited += 1
        name = type(node).__name__
        if name == "LogBackward0":
            _check_log(seen, node)
        elif name in _SUMMED or name in _SCALED and _by_scalar(node):
            todo.extend(_graph_inputs(node))


def _by_scalar(node: Any) -> bool:
    """A product or quotient with one graph input and a one-element constant."""
    if len(_graph_inputs(node)) != 1:
        return False
    for attr in ("_saved_other", "_saved_self"):
        try:
            t = getattr(node, attr)
        except (AttributeError, RuntimeError):
            continue
        if isinstance(t, torch.Tensor):
            return t.numel() == 1
    return False


def _check_log(seen: dict[Any, tuple[int, int]], log: Any) -> None:
    inputs = _graph_inputs(log)
    found = _guarded_sigmoid(inputs[0]) if len(inputs) == 1 else None
    if found is None:
        return
    site = created_site(log)[0]
    if site is None or site in seen:
        return
    try:
        log_in, s = log._saved_self, found[0]._saved_result
    except (AttributeError, RuntimeError):
        return
    counted = _drowned(log_in, s, found[1])
    if counted is not None:
        seen[site] = counted


def _drowned(log_in: Any, s: Any, complement: bool) -> tuple[int, int] | None:
    """(drowned elements, elements) when the guard is a small positive constant and drowns at
    least 1% of them, else None."""
    if not isinstance(log_in, torch.Tensor) or not isinstance(s, torch.Tensor) \
            or not log_in.is_floating_point() or log_in.numel() != s.numel() or not s.numel():
        return None
    with torch.no_grad():
        v = (1 - s if complement else s).detach().reshape(-1).float()
        total = log_in.detach().reshape(-1).float()
        guard = total - v
        if not bool(torch.isfinite(guard).all()) or float(guard.max()) <= 0 \
                or float(guard.max()) > _GUARD or float(guard.min()) < -_GUARD:
            return None
        drowned = int((v < _DROWNED * total).sum())
    n = v.numel()
    return (drowned, n) if drowned and drowned * 100 >= n else None


def drowned_log_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [epsilon that drowns a log's gradient]: one finding per log line, when an
    optimizer stepped."""
    seen = _BY_STATE.pop(state, None)
    if not seen or not any(rec.steps for rec in list(data.optimizers.values())):
        return []
    from gradtrace.runtime.build import make

    out = []
    for site, (drowned, n) in seen.items():
        out.append(make(
            CODE, site,
            f"the epsilon added inside this log is larger than the sigmoid's "
            f"output for {drowned} of {n} elements: there the log is pinned at `log(eps)` and "
            "its gradient is `s / eps` times what it should be, so exactly the most wrong "
            "predictions stop training",
            fix="compute the log from the logits: `F.logsigmoid(x)` for `log(sigmoid(x))`, "
                "`F.logsigmoid(-x)` for `log(1 - sigmoid(x))` (or "
                "`binary_cross_entropy_with_logits`)",
            severity="warning"))
    return out


__all__ = ["CODE", "check_logs", "drowned_log_findings"]
