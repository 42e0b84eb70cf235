"""Who wants the loss of each traced ``backward()``: a watch asks, the tracer tells.

The tracer (:meth:`gradtrace.runtime.trace.state.TraceState.on_backward_start`) calls every
listener with the one tensor a traced ``backward()`` starts from; ``watch`` registers one
(a functional loss is seen that way too). Neither product imports the other.
"""
from __future__ import annotations

from typing import Any

LOSS_LISTENERS: list[Any] = []  # watches, told the tensor each traced backward() starts from


class LossListening:
    """One :data:`LOSS_LISTENERS` entry; ``remove()`` like a torch hook handle."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        LOSS_LISTENERS.append(fn)

    def remove(self) -> None:
        if self.fn in LOSS_LISTENERS:
            LOSS_LISTENERS.remove(self.fn)
