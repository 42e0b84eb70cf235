"""Where a layer or a parameter was replaced, seen by torch's global registration hooks.

# NOTE [replaced after the optimizer]
``module.<name> = value`` with a submodule or a Parameter goes through torch's global module
and parameter registration hooks, also from ``setattr``, ``load_state_dict(assign=True)`` and
library helpers. When the new object takes the place of another one, the chain of user frames
is noted (frame ids and lines only, no frame or tensor is kept alive past the call). When the
optimizer later holds the stale parameters while the new ones get the gradients
(:func:`gradtrace.runtime.trace.silent` reports "re-created after the optimizer"), the line
named is:

- the assignment itself when it runs in a method of the module it changes (the module re-creates
  its own parameter, e.g. ``self.scale = nn.Parameter(...)`` in an init helper): that method
  should have written into the existing parameter;
- otherwise the line, in the frame that also runs the training steps, that called the code doing
  the replacement (``speedup(model)``, ``model = fix(model)``): the helper did what it is for,
  the call came after the optimizer was built.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.modes import Stack, common_line, user_stack


@dataclass
class Replaced:
    """One replacement: the new object (weakly), the user frames, whether a method of the
    changed module made it."""

    ref: weakref.ref[Any]
    stack: Stack
    own: bool


def note_replaced(data: Any, module: Any, value: Any) -> None:
    """Remember that ``value`` replaced another object on ``module`` (from a hook)."""
    import sys

    stack = user_stack()
    own = False
    if stack:
        f = sys._getframe(1)
        while f is not None and id(f) != stack[0][0]:
            f = f.f_back  # type: ignore[assignment]
        own = f is not None and f.f_code.co_argcount > 0 and \
            f.f_locals.get(f.f_code.co_varnames[0]) is module
        del f
    data.replaced[id(value)] = Replaced(weakref.ref(value), stack, own)


def _lookup(data: Any, obj: Any) -> Replaced | None:
    hit = data.replaced.get(id(obj))
    return hit if hit is not None and hit.ref() is obj else None


def replacement_site(data: Any, module: Any) -> Site | None:
    """Where ``module`` (or one of its own parameters) replaced an earlier one (see NOTE)."""
    hit = _lookup(data, module) or next(
        (h for h in (_lookup(data, p) for p in module._parameters.values() if p is not None)
         if h is not None), None)
    if hit is None or not hit.stack:
        return None
    _, code, line = hit.stack[0]
    inner = Site(code.co_filename, line, code.co_name)
    if hit.own:
        return inner
    return common_line(hit.stack, data.step_stack or ()) or inner
