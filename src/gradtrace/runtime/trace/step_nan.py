"""Where a NaN is born inside an optimizer's own ``step()``, written by the user.

# NOTE [NaN made by a step]
A hand-written optimizer (dion's NorMuon, LAMB/LARS trust ratios) can make NaN out of finite
gradients: ``norm_u / norm_u_new`` is ``0 / 0`` for a weight whose gradient is all zeros (the
input projection behind a zero-initialised output projection). The step writes NaN into the
weight, the next loss is NaN and so is every gradient after it: NOTE [NaN origin] and
NOTE [forward NaN origin] then name the forward op that first carries the NaN weights, never
the division. The run takes the tracer's mode off the stack for an optimizer's own work
(NOTE [trace arming]); for a ``step`` whose code is the user's (``inspect.unwrap`` of the
class's ``step`` is not in torch), during its first ``_STEPS`` steps (``_HUNTS`` in a session),
the mode stays on and every floating-point output of a call in the step is checked as the first
forward's are (:func:`fwd_nan.check_output`'s rule: the first output holding NaN from inputs
without NaN; an inf made from finite inputs and then met is named where it was made). The origin
is kept only if, when the step ends, a parameter of that optimizer holds a non-finite value (a
NaN in a branch the step drops changes nothing). GT825 then names it, before the forward
origins, when a later step sees a non-finite gradient. Optimizers from ``torch.optim`` are never
hunted.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.inplace_value import note_step_write

_STEPS = 3  # steps hunted per optimizer
_HUNTS = 8  # steps hunted per session


@dataclass
class StepHunt:
    steps: dict[int, int] = field(default_factory=dict)  # optimizer id -> steps hunted
    hunting: int | None = None  # id of the optimizer whose step runs hunted now
    found: Any = None  # (line, op) of the first NaN of the running step
    origin: tuple[Site, str] | None = None  # kept: the parameters became non-finite
    inf: dict[int, Any] = field(default_factory=dict)  # fwd_nan.check_output's scratch


def _user_step(opt: Any) -> bool:
    try:
        fn = inspect.unwrap(type(opt).step)
        return not is_internal(fn.__code__)
    except (AttributeError, ValueError, TypeError):
        return False


def hunt_starts(state: Any, opt: Any) -> bool:
    """From the step pre-hook: hunt this step? (True keeps the mode on, see the NOTE.)"""
    hunt = state.step_hunt
    if hunt is not None and (hunt.origin is not None or sum(hunt.steps.values()) >= _HUNTS):
        return False
    done = hunt.steps.get(id(opt), 0) if hunt is not None else 0
    if done >= _STEPS or not _user_step(opt):
        return False
    if hunt is None:
        hunt = state.step_hunt = StepHunt()
    hunt.steps[id(opt)] = done + 1
    hunt.hunting, hunt.found = id(opt), None
    return True


def step_call(state: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """One torch call inside a hunted step (the mode's fast path hands it here)."""
    out = func(*args, **kwargs)
    if args and out is args[0] and type(out) is torch.Tensor:  # in place (inplace_value.py)
        note_step_write(state, func, out)
    hunt = state.step_hunt
    if hunt.found is None and type(out) is torch.Tensor:
        from gradtrace.runtime.trace.fwd_nan import check_output

        saved = (state.fwd_nan, state.fwd_hunt, state.fwd_inf, state.fwd_nan_nograd)
        state.fwd_nan, state.fwd_inf = None, hunt.inf
        try:
            with torch._C.DisableTorchFunction():
                check_output(state, func, args, out)
            if state.fwd_nan is not None:
                hunt.found = (state.fwd_nan[0], state.fwd_nan[1])
        except Exception as exc:  # ours: never the user's step
            from gradtrace.runtime.trace.mode_checks import _oops

            _oops(exc)
        finally:
            state.fwd_nan, state.fwd_hunt, state.fwd_inf, state.fwd_nan_nograd = saved
    return out


def hunt_ends(state: Any, opt: Any) -> None:
    """From the step post-hook: keep the origin if the parameters are no longer finite."""
    hunt = state.step_hunt
    if hunt is None or hunt.hunting != id(opt):
        return
    hunt.hunting = None
    hunt.inf.clear()
    if hunt.found is None or hunt.found[0] is None:
        return
    with torch._C.DisableTorchFunction(), torch.no_grad():
        bad = any(not bool(torch.isfinite(p).all()) for g in opt.param_groups
                  for p in g["params"] if isinstance(p, torch.Tensor) and p.is_floating_point())
    if bad:
        hunt.origin = hunt.found


def step_nan_finding(state: Any, name: str, step: int, site: Site | None) -> Any:
    """GT825 at the op of a user step that made the parameters' NaN (see the NOTE), or None."""
    hunt = state.step_hunt
    if hunt is None or hunt.origin is None:
        return None
    from gradtrace.runtime.build import make

    at, op = hunt.origin
    return make("GT825", at, f"non-finite gradient (NaN/Inf) first seen in {name} at optimizer "
                f"step {step}: the optimizer's own step() made NaN/Inf here, in `{op}`, from "
                "finite values (a 0/0 or x/0 of a norm or a ratio, a sqrt or log of a value "
                "that reached 0) and wrote it into the parameters; every later loss and "
                "gradient carries it", fix="guard the division or the root in the step (clamp "
                "the denominator to a small eps, skip the rescale when the norm is 0)",
                related=[(site, "the non-finite gradient reached optimizer.step() here")],
                severity="warning")


__all__ = ["StepHunt", "hunt_ends", "hunt_starts", "step_call", "step_nan_finding"]
