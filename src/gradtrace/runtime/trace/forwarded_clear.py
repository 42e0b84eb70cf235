"""Where gradients were cleared, seen through a method that forwards ``zero_grad()``.

# NOTE [zero_grad forwarded by a wrapper]
A wrapper object (an accelerator's optimizer, a trainer's or a model's own ``zero_grad``
method) implements ``zero_grad()`` by calling the torch optimizer's (or module's)
``zero_grad()``. The clearing torch sees runs in that method, but the method only does what
it is for whenever it is called: the training code's ``optimizer.zero_grad()`` decides when
gradients are cleared, and is the line to move (DiffSynth-Studio's runner calling the wrapped
optimizer's ``zero_grad()`` at the top of the accumulation block). Run-time fact: the user
frame running the clearing is a method called ``zero_grad`` (the protocol method torch's
optimizers and modules define, which the wrapper forwards); while it is, the next user frame
out is taken. A clearing written in any other function (``p.grad = None`` in a loop, a helper
``reset_grads(model)``) keeps its own line.
"""
from __future__ import annotations

from typing import Any

from gradtrace.runtime.frames import is_internal, user_frame


def clearing_raw_site() -> tuple[Any, int, int] | None:
    """``(code, lineno, lasti)`` of the user's frame clearing gradients now, taken out of
    forwarding ``zero_grad`` methods (NOTE)."""
    f = user_frame(2)
    while f is not None and f.f_code.co_name == "zero_grad" and f.f_code.co_argcount >= 1:
        g = f.f_back
        while g is not None and is_internal(g.f_code):
            g = g.f_back
        if g is None:
            break
        f = g
    out = None if f is None else (f.f_code, f.f_lineno, f.f_lasti)
    del f
    return out
