"""# NOTE [step in a helper handed the optimizer]
``optimizer.step()`` written once in a helper that is given the optimizer (``def
_perform_update(self, loss, opt, network): ... opt.step()``, called for the critic, the actor,
the temperature) is the same line for every optimizer: the statement that decides which
optimizer steps, and when, is the helper's call. Read when the step ends: walking out from the
user frame that called ``step()``, while the frame's own arguments hold that optimizer, the
caller's line is the one that chose it (SPiRL's critic updates before the policy loss's
backward). A step in a function that holds the optimizer itself (an attribute, a local)
keeps its line; so does a step whose handing call is still running when backward() fails
(a training function given the optimizers, which steps and then calls the failing backward
itself: the step is that function's own line)."""
from __future__ import annotations

from typing import Any

from gradtrace.runtime.frames import Site, is_internal, user_frame


def _handed(frame: Any, opt: Any) -> bool:
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    if not n:  # a loop at module level, a step() without arguments: nothing handed in
        return False
    local = frame.f_locals  # (a dict of all the locals, built on each read)
    return any(local.get(name) is opt for name in code.co_varnames[:n])


def step_caller(opt: Any, start: int = 1, limit: int = 8) -> Site | None:
    """The line of the outermost call that handed ``opt`` down to the ``step()`` running now,
    or None when the function calling ``step()`` holds the optimizer itself."""
    f = user_frame(start + 1)
    moved = None
    while f is not None and limit > 0 and _handed(f, opt):
        back = f.f_back
        while back is not None and is_internal(back.f_code):
            back = back.f_back
        if back is None:
            break
        f, moved, limit = back, Site(back.f_code.co_filename, back.f_lineno,
                                     back.f_code.co_name), limit - 1
    return moved


def still_running(site: Site, limit: int = 64) -> bool:
    """Whether a live frame is at ``site`` now (the call that handed the optimizer down has not
    returned)."""
    import sys

    f = sys._getframe(1)
    while f is not None and limit > 0:
        if f.f_lineno == site.line and f.f_code.co_filename == site.path:
            return True
        f, limit = f.f_back, limit - 1
    return False
