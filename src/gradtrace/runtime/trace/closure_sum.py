"""Gradients summed over the evaluations of an LBFGS closure.

# NOTE [closure evaluations summed]
``torch.optim.LBFGS.step(closure)`` calls the closure up to ``max_iter`` (+ line search) times
per step and reads ``.grad`` after each call: the closure must clear the gradients before its
backward(). A closure that does not (the clearing sits after ``step()``, or nowhere) makes each
evaluation add its gradient onto the ones before: LBFGS's direction, curvature pairs and line
search see a sum of stale gradients and the fit stalls or turns NaN. Nothing fails.
The run watches each LBFGS step whose closure is a Python function: each backward() it runs
belongs to one evaluation, the frame of the closure's code on the stack (held only while the
step runs). When an evaluation's backward() starts and no gradient was cleared since the last
evaluation's, the gradients of two evaluations were summed. A closure that clears at its top
is silent, and so is one that runs several backward() calls in one evaluation (micro-batches
after one clearing: one frame). The line named is the clearing the program does right after
the step, in the function that stepped (it belongs at the top of the closure); without one,
the closure's backward(). LBFGS's own work between evaluations is neither a clearing nor a use
of a parameter under no_grad: its ``p.new(n).zero_()`` for a layer the forward skipped (no
gradient) zero-fills a fresh buffer, and ``_add_grad``'s ``view_as(p)`` reads a shape.
"""
from __future__ import annotations

import sys
from types import CodeType, FrameType
from typing import Any, Callable

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site, raw_site


class ClosureWatch:
    """One LBFGS step being watched: where it was called, the closure's code, the frame of the
    evaluation that ran the last backward(), and whether a gradient was cleared since."""

    __slots__ = ("step", "code", "frame", "cleared")

    def __init__(self, step: Site | None, code: CodeType) -> None:
        self.step, self.code = step, code
        self.frame: FrameType | None = None
        self.cleared = False


class Summed:
    """What was found: the step, the backward() of a later evaluation, and the clearing after
    the step."""

    __slots__ = ("step", "backward", "clear", "waiting")

    def __init__(self, step: Site | None, backward: Site) -> None:
        self.step, self.backward = step, backward
        self.clear: Site | None = None
        self.waiting = False


def step_starts(state: Any, opt: Any, closure: Any, where: Callable[[], Site | None]) -> None:
    """An optimizer steps with ``closure``: watch it when it is LBFGS (which evaluates the
    closure repeatedly) and the closure is a function (``where`` reads the step's line)."""
    import torch

    code = getattr(closure, "__code__", None)
    if isinstance(opt, torch.optim.LBFGS) and isinstance(code, CodeType):
        state.closure_watch = ClosureWatch(where(), code)


def step_ends(state: Any) -> None:
    found = state.closure_sum
    if found is not None and state.closure_watch is not None and found.clear is None:
        found.waiting = True  # the next clearing, if it is in the stepping function
    state.closure_watch = None  # the evaluation's frame is released with it


def _evaluation(code: CodeType) -> FrameType | None:
    f = sys._getframe(2)
    for _ in range(64):
        if f is None or f.f_code is code:
            return f
        f = f.f_back
    return None


def backward_starts(state: Any, site: Site | None) -> None:
    w = state.closure_watch
    found = state.closure_sum
    if found is not None:
        found.waiting = False
    if w is None or site is None:
        return
    frame = _evaluation(w.code)
    if frame is None:
        return
    if found is None and w.frame is not None and frame is not w.frame and not w.cleared:
        state.closure_sum = Summed(w.step, site)
    w.frame, w.cleared = frame, False


def cleared(state: Any) -> None:
    """A gradient was cleared (``zero_()``, ``.grad = None``) inside an evaluation of the
    closure (or a function it called). Not a ``zero_()`` LBFGS itself runs between evaluations
    (``_gather_flat_grad`` zero-fills a fresh buffer for each parameter without a gradient:
    a layer the forward skips), which clears no gradient."""
    w = state.closure_watch
    if w is not None and not w.cleared and _evaluation(w.code) is not None:
        w.cleared = True
    found = state.closure_sum
    if found is not None and found.waiting:
        found.waiting = False
        raw = raw_site()
        at = None if raw is None else state.site(raw)
        step = found.step
        if at is not None and step is not None and at.path == step.path \
                and at.function == step.function and at.line > step.line:
            found.clear = at


def closure_findings(state: Any) -> list[Finding]:
    found = state.closure_sum
    if found is None:
        return []
    where = found.clear or found.backward
    related = [(found.step, "LBFGS evaluates the closure several times in this step")] \
        if found.step is not None else []
    if found.clear is not None:
        related.append((found.backward, "each evaluation's backward() adds to the last"))
    moved = (f"{src(found.clear)} clears them only after the step" if found.clear is not None
             else "nothing clears them inside the closure")
    return [make("GT891", where,
                 "the gradients of the closure's evaluations are summed: LBFGS calls the "
                 f"closure several times per step and reads `.grad` after each, but {moved}, "
                 "so each evaluation's backward() adds onto the ones before and the step's "
                 "direction and line search use stale sums",
                 fix="call `optimizer.zero_grad()` at the top of the closure, before its "
                     "backward()",
                 related=related, severity="warning")]
