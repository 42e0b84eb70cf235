"""A learning-rate scheduler counted in epochs, stepped once per batch.

# NOTE [schedule collapsed]
``StepLR(opt, step_size=epochs // 2, gamma=0.1)`` with ``scheduler.step()`` inside the batch loop
divides the learning rate by 10 every few batches: within the first epoch it is 1000 times
smaller and training stalls; nothing fails. The optimizer step hook reads the first parameter
group's ``lr`` (``initial_lr`` is there once a scheduler is attached) and counts how often it
changed. When, within the first 64 optimizer steps, it has changed at least three times and
fallen to 1/1000 of ``initial_lr`` or less, the scheduler objects holding the optimizer are
looked up once (``gc.get_referrers``). A decay-only scheduler whose parameters are
conventionally epochs (``StepLR``, ``MultiStepLR``, ``ExponentialLR``) that has stepped as
often as the optimizer is reported at its ``.step()`` call: the line in the function that steps
the optimizer where the name (or ``self`` attribute) bound to that scheduler calls ``step``,
read from the bytecode of that function. A schedule with a horizon (``OneCycleLR``,
``CosineAnnealingLR``, ``LinearLR``, warm-up lambdas) is meant per iteration and reaches its
floor at its planned end; a per-epoch ``StepLR`` changes the rate once per epoch (it steps far
less often than the optimizer): neither is reported. (Session 21: the threshold was 1/1000;
it is now 1/10 within the first 64 steps, which a schedule counted in iterations does not reach:
llama-recipes' ``StepLR(step_size=1, gamma=0.85)`` stepped next to ``optimizer.step()``.)

# NOTE [schedule past its horizon]
``CosineAnnealingLR(opt, T_max=epochs)`` stepped once per batch reaches its minimum after
``T_max`` batches and then climbs back up: the rate cycles through cosine periods instead of
decaying once. The step hook follows the first group's rate; the first time it rises after
having fallen (within the first 64 steps), the schedulers holding the optimizer are looked up:
a ``CosineAnnealingLR`` that has stepped as often as the optimizer and more than ``T_max``
times is reported at its ``.step()`` line. A warm-up (a rate that rises before it ever fell),
``CosineAnnealingWarmRestarts`` and ``CyclicLR`` (which rise on purpose), and a cosine stepped
once per epoch within its ``T_max`` are silent.
"""
from __future__ import annotations

import ast
import dis
import gc
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site

_EPOCH_COUNTED = ("StepLR", "MultiStepLR", "ExponentialLR")
COLLAPSED = 0.1001  # the rate lost 90% within the first 64 optimizer steps


def watch_lr(rec: Any, opt: Any, data: Any) -> None:
    """From the optimizer step pre-hook: follow the first group's learning rate
    (``rec.last_lr`` holds the last rate, whether it ever fell, and whether the collapse was
    looked up already)."""
    g0 = opt.param_groups[0] if opt.param_groups else None
    if g0 is None or "initial_lr" not in g0 or rec.schedule_checked:
        return
    lr = g0["lr"]
    if isinstance(lr, torch.Tensor) or not isinstance(g0["initial_lr"], (int, float)):
        return
    last, fell, looked = rec.last_lr if rec.last_lr is not None else (None, False, False)
    if last is not None and lr != last:
        rec.lr_changes += 1
    rec.last_lr = (lr, fell or (last is not None and lr < last), looked)
    if rec.steps > 64:
        rec.schedule_checked = True
    elif fell and lr > last:  # NOTE [schedule past its horizon]
        rec.schedule_checked = True
        found = _past_horizon(opt, rec.steps)
        if found is not None:
            data.schedules.append(found)
    elif not looked and rec.lr_changes >= 3 and lr <= COLLAPSED * g0["initial_lr"]:
        rec.last_lr = (lr, True, True)
        found = _collapsed(opt, rec.steps)
        if found is not None:
            rec.schedule_checked = True
            data.schedules.append(found)


def _schedulers(opt: Any) -> list[Any]:
    from torch.optim.lr_scheduler import LRScheduler

    out = []
    for r in gc.get_referrers(opt):
        if isinstance(r, LRScheduler):
            out.append(r)
        elif isinstance(r, dict) and r.get("optimizer") is opt:
            out += [o for o in gc.get_referrers(r) if isinstance(o, LRScheduler)
                    and getattr(o, "__dict__", None) is r]
    return out


def _collapsed(opt: Any, steps: int) -> tuple[Site | None, str, int, float] | None:
    """(the scheduler's step() line, its class, its steps, lr ratio) or None."""
    for s in _schedulers(opt):
        name = type(s).__name__
        if name in _EPOCH_COUNTED and type(s).__module__ == "torch.optim.lr_scheduler" \
                and s.last_epoch >= steps - 1:
            g0 = opt.param_groups[0]
            return _step_site(s), name, s.last_epoch, g0["lr"] / g0["initial_lr"]
    return None


def _past_horizon(opt: Any, steps: int) -> tuple[Site | None, str, int, float] | None:
    """(the step() line, the class, its T_max, -1.0) of a ``CosineAnnealingLR`` stepped as
    often as the optimizer and past its ``T_max``, or None. NOTE [schedule past its horizon]."""
    for s in _schedulers(opt):
        if type(s).__name__ == "CosineAnnealingLR" and isinstance(getattr(s, "T_max", None), int) \
                and type(s).__module__ == "torch.optim.lr_scheduler" \
                and s.last_epoch > s.T_max and s.last_epoch >= steps - 1:
            return _step_site(s), "CosineAnnealingLR", s.T_max, -1.0
    return None


def _step_site(sched: Any) -> Site | None:
    """The ``<name>.step()`` line of ``sched`` in the user frame stepping the optimizer."""
    from gradtrace.runtime.frames import user_frame

    f = user_frame(3)
    if f is None:
        return None
    names = {k for k, v in {**f.f_globals, **f.f_locals}.items() if v is sched}
    attrs = {k for k, v in vars(f.f_locals.get("self", None) or object()).items()
             if v is sched} if hasattr(f.f_locals.get("self", None), "__dict__") else set()
    prev: Any = None
    prev2: Any = None
    lines: list[int] = []
    for ins in dis.get_instructions(f.f_code):
        if ins.opname in ("LOAD_METHOD", "LOAD_ATTR") and ins.argval == "step" and prev is not None:
            loaded = prev.opname in ("LOAD_NAME", "LOAD_FAST", "LOAD_GLOBAL", "LOAD_DEREF") \
                and prev.argval in names
            attr = prev.opname in ("LOAD_ATTR", "LOAD_METHOD") and prev.argval in attrs \
                and prev2 is not None and prev2.argval == "self"
            if (loaded or attr) and ins.positions is not None and ins.positions.lineno:
                lines.append(ins.positions.lineno)
        prev2, prev = prev, ins
    if not lines:
        return None
    # several calls (a ReduceLROnPlateau branch given the metric beside the plain one): the
    # scheduler found takes no metric, so the call without arguments is the one that ran
    plain = _argless_step_lines(f.f_code.co_filename, set(lines))
    line = next((n for n in lines if n in plain), lines[0])
    return Site(f.f_code.co_filename, line, f.f_code.co_name)


def _argless_step_lines(path: str, lines: set[int]) -> set[int]:
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(path) if len(lines) > 1 else None
    return set() if tree is None else {
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno in lines
        and isinstance(n.func, ast.Attribute) and n.func.attr == "step" and not n.args
        and not n.keywords}


def schedule_findings(data: Any) -> list[Finding]:
    """NOTE [schedule collapsed], NOTE [schedule past its horizon]."""
    out = []
    for site, name, steps, ratio in data.schedules:
        if site is None:
            continue
        if ratio < 0:  # steps holds T_max
            out.append(make(code_for("epoch-scheduler-stepped-per-batch", "GT526"), site,
                            f"this {name}(T_max={steps}) steps once per optimizer step: its "
                            f"cosine ended after {steps} optimizer steps and the learning rate "
                            "is now climbing back up from its minimum (it keeps cycling instead "
                            "of decaying once over the training)", fix="call scheduler.step() "
                            "once per epoch (after the batch loop), or give T_max in optimizer "
                            "steps (epochs x batches per epoch)", severity="warning"))
            continue
        out.append(make(code_for("epoch-scheduler-stepped-per-batch", "GT526"), site, f"this {name} steps once per optimizer step ({steps} "
                        f"times in the first {steps + 1} steps): its step size counts epochs, "
                        f"so the learning rate is already {ratio:.0e} times its initial value "
                        "and keeps falling at every step", fix="call scheduler.step() once per "
                        "epoch (after the batch loop), or give it a step size in iterations",
                        severity="warning"))
    return out
