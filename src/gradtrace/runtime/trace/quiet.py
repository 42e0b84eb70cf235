"""Whether an armed step learned anything: the shape of a session's records.

# NOTE [quiet warm-up]
The warm-up of NOTE [trace arming] arms the first ``WARM_STEPS`` optimizer steps because most
gradient bugs show there; on a loop that repeats itself, the later ones record the same lines
again (a REINFORCE episode: 24 ms of recording a step, 16 times). So the warm-up ends early
once ``QUIET_STEPS`` armed steps in a row (and at least ``MIN_WARM`` in all) left the session's
records as they found them. "As they found them" is :func:`learned`: the number of code
objects the frame walk has met, and for the tracer's state, the hooks' state and each module
and optimizer record, every container's size and whether every other attribute is set
(``None``, zero) -- a generic shape, so that a record added later is counted without being
listed here. Logs written on every step by design (the cut of each tensor, each backward's
line, ``PER_CALL``) are left out; anything else that grows on every step (a store keyed by
tensor) keeps the step from being quiet, which only keeps the old warm-up.

An armed step after the warm-up (a paced one, NOTE [watch pace]) that meets a new line (a code
object, a site, a cut, an event, a module or an optimizer not seen before: :func:`sites`) arms
every step again for a warm-up, which may end early the same way. A non-finite gradient or a
new optimizer re-arms as before and is never cut short below ``WARM_STEPS``.
"""
from __future__ import annotations

from collections import deque
from typing import Any

from gradtrace.runtime.frames import FRAME_BY_ID

QUIET_STEPS = 3  # armed steps in a row that learned nothing end the warm-up...
MIN_WARM = 5  # ...once this many steps have been armed
# records written on every armed step by design: their growth is not something new
PER_CALL = frozenset({"cuts", "backward_sites", "kept_roots", "inplace", "windows"})
_SIZED = (dict, set, frozenset, list, tuple, deque)
_NUMBER = (bool, int, float)


def learned(state: Any, data: Any) -> tuple[Any, ...]:
    """The shape of what a session has recorded (see the NOTE)."""
    out: list[Any] = [len(FRAME_BY_ID)]
    _shape(vars(state), out)
    _shape(vars(data), out)
    for rec in list(data.modules.values()):
        _shape(vars(rec), out)
    for rec in list(data.optimizers.values()):
        _shape(vars(rec), out)
    return tuple(out)


def sites(state: Any, data: Any) -> tuple[int, ...]:
    """How many lines the session has met: code objects, sites, cuts, events, modules,
    optimizers (a growth is a new line, not a new count)."""
    return (len(FRAME_BY_ID), len(state._site_cache), len(state._cut_cache), len(state.events),
            len(data.modules), len(data.optimizers))


def _shape(attrs: dict[str, Any], out: list[Any]) -> None:
    for name, value in attrs.items():
        if name in PER_CALL:
            continue
        if isinstance(value, _SIZED):
            out.append(len(value))
        elif isinstance(value, _NUMBER):
            out.append(bool(value))
        else:
            out.append(value is None)
