"""A log of exactly zero made by a sigmoid that saturated, for NOTE [NaN origin].

# NOTE [log of a saturated sigmoid]
``log(1 - sigmoid(x))`` (a focal or hand-written binary cross-entropy) is -inf where the
sigmoid's float32 output rounded to exactly 1.0 (``x`` above about 17), and ``log(sigmoid(x))``
where it rounded to exactly 0.0; times a weight of 0 (a mask, ``(1 - p) ** 2`` at 1.0) the loss
is NaN, and the node whose backward first passes NaN on is the product on the loss line. What
the user must change is the sigmoid (clamp its output into (eps, 1 - eps), or compute the log
from the logits: ``F.logsigmoid``): the op below the product is a ``log`` whose saved input
holds an exact 0, and that input is the sigmoid's saved output through at most a few
element-wise nodes (``1 - p``), holding an exact 0.0 or 1.0. Both facts are read from the saved
tensors of nodes the backward has not run yet (the origin's inputs: still saved). ``None`` when
no such chain is found, the origin is the log itself (its saved input is gone), or the sigmoid
has no recorded line.
"""
from __future__ import annotations

from typing import Any, Iterator

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.records import created_site

SATURATED = "saturated:"  # the origin's op prefix (nonfinite.nan_text)
_LOGS = ("LogBackward0", "Log2Backward0", "Log10Backward0")
_THROUGH = ("RsubBackward1", "RsubBackward0", "SubBackward0", "SubBackward1", "NegBackward0",
            "AddBackward1", "MulBackward1", "CloneBackward0", "ToCopyBackward0")


def _below(node: Any, depth: int, through: tuple[str, ...] | None = None) -> Iterator[Any]:
    level = [node]
    for _ in range(depth):
        nxt = []
        for n in level:
            try:
                nxt.extend(m for m, _ in n.next_functions if m is not None)
            except (AttributeError, RuntimeError):
                continue
        yield from nxt
        level = [m for m in nxt if through is None or type(m).__name__ in through]


def _exact(t: Any, *values: float) -> bool:
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or not t.numel():
        return False
    with torch.no_grad():
        return bool(sum((t.detach() == v) for v in values).any())


def saturated_sigmoid(origin: Any) -> Site | None:
    """NOTE [log of a saturated sigmoid]: the sigmoid's line, or None."""
    for log in (n for n in _below(origin, 2) if type(n).__name__ in _LOGS):
        try:
            if not _exact(log._saved_self, 0.0):
                continue
        except (AttributeError, RuntimeError):
            continue
        site = _sigmoid_under(log)
        if site is not None:
            return site
    return None


def _sigmoid_under(log: Any) -> Site | None:
    for node in _below(log, 3, _THROUGH):
        if type(node).__name__ != "SigmoidBackward0":
            continue
        try:
            if _exact(node._saved_result, 0.0, 1.0):
                return created_site(node)[0]
        except (AttributeError, RuntimeError):
            continue
    return None


def saturated_log_input(name: str, args: Any) -> Site | None:
    """The same reading in the forward (NOTE [forward NaN origin]): ``log`` made an inf from
    an input holding an exact 0 that a saturated sigmoid made: the sigmoid's line."""
    if name not in ("log", "log2", "log10") or not args or not _exact(args[0], 0.0):
        return None
    gf = getattr(args[0], "grad_fn", None)
    if gf is None:
        return None
    if type(gf).__name__ == "SigmoidBackward0":  # log(sigmoid(x)) itself
        return _sigmoid_under(_Above(gf))
    return _sigmoid_under(_Above(gf)) if type(gf).__name__ in _THROUGH else None


def saturated_under(tensors: list[Any]) -> Site | None:
    """The forward op that made NaN from an inf (``-inf * 0``): the inf's graph holds a log of
    an exact 0 made by a saturated sigmoid, a node or two down: the sigmoid's line
    (NOTE [log of a saturated sigmoid])."""
    nodes = [t.grad_fn for t in tensors if getattr(t, "grad_fn", None) is not None]
    return saturated_sigmoid(_Above(*nodes)) if nodes else None


class _Above:
    """A stand-in node whose inputs are ``nodes`` (so a walk starts at them)."""

    def __init__(self, *nodes: Any) -> None:
        self.next_functions = tuple((n, 0) for n in nodes)
