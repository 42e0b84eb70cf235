"""A clearing that reaches only part of what an optimizer steps.

# NOTE [clear of a part]
``ae.encoder.zero_grad()`` (a submodule), or ``head_opt.zero_grad()`` where ``opt`` steps the
whole model, clears the gradients of some of the parameters an optimizer steps and not the
others: theirs keep adding up across the batches and every ``opt.step()`` applies the sum.
Nothing fails. The accumulation check of an optimizer follows one representative parameter
(the first with a gradient at a step) and stands down once any clearing ran (a clearing seen
says the program means to clear); so it follows a second one too, the last parameter with a
gradient. When, between two steps, one of the two was cleared (its ``.grad`` set to None or
zeroed, seen by NOTE [clear on some passes only]'s watch) and the other was not (the same
gradient tensor, a backward() added into it), the clearing is partial: the line that cleared
the one is named (the user's line that called ``zero_grad()``), with the backward() that added
into the other's stale gradient and the step that applied it. Optimizers whose two
representatives are both cleared, or neither, are left to the other checks; gradients
accumulated on purpose over several backward() calls are cleared as a whole, never in part.
"""
from __future__ import annotations

from typing import Any, Callable

from gradtrace.runtime.frames import Site

Rep = tuple[int, int, int, int]  # (param id, grad id, grad version, backward() calls then)


def _cleared(state: Any, old: Rep) -> bool:
    """The parameter of ``old`` had its gradient cleared after the step that recorded it."""
    return state.clear_ticks.get(old[0], -1) >= old[3]


def _accumulated(state: Any, old: Rep | None, new: Rep | None) -> bool:
    return old is not None and new is not None and old[0] == new[0] and old[1] == new[1] \
        and new[3] > old[3] and new[2] > old[2] and not _cleared(state, old)


def check_partial(state: Any, rec: Any, first: Rep | None, last: Rep | None,
                  where: Callable[[], Site | None], opt: Any, name: Callable[[Any], str]) -> None:
    """Between this optimizer's last step and this one, was one representative cleared and the
    other's gradient added into? Records the finding's facts on ``rec`` (NOTE above); ``where``
    reads the step's line (a frame walk), only when it is."""
    if rec.accumulate_site is not None or first is None or last is None or first[0] == last[0]:
        return
    pairs = ((rec.rep, first, rec.rep_last, last), (rec.rep_last, last, rec.rep, first))
    for old, new, other_old, other_new in pairs:
        if not _accumulated(state, old, new) or other_old is None or other_new is None \
                or other_old[0] != other_new[0] or not _cleared(state, other_old):
            continue
        clear = state.clear_sites.get(other_old[0])
        if clear is None:
            continue
        param = next((p for g in opt.param_groups for p in g["params"] if id(p) == new[0]),
                     None)
        site = where()
        rec.accumulate_site = state.backward_sites[-1] if state.backward_sites else site
        rec.accumulate_step = site
        rec.partial = (clear, name(param) if param is not None else "")
        return


def partial_message(rec: Any) -> str:
    kept = f" (`{rec.partial[1]}` among them)" if rec.partial[1] else ""
    return ("this clears the gradients of only part of the parameters the optimizer steps: "
            f"the others{kept} keep the previous steps' gradients, each backward() adds into "
            "them and every step applies their sum")
