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
less often than the optimizer): neither is reported.
"""
from __future__ import annotations

import dis
import gc
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site

_EPOCH_COUNTED = ("StepLR", "MultiStepLR", "ExponentialLR")


def watch_lr(rec: Any, opt: Any, data: Any) -> None:
    """From the optimizer step pre-hook: follow the first group's learning rate."""
    g0 = opt.param_groups[0] if opt.param_groups else None
    if g0 is None or "initial_lr" not in g0 or rec.schedule_checked:
        return
    lr = g0["lr"]
    if isinstance(lr, torch.Tensor) or not isinstance(g0["initial_lr"], (int, float)):
        return
    if rec.last_lr is not None and lr != rec.last_lr:
        rec.lr_changes += 1
    rec.last_lr = lr
    if rec.steps > 64:
        rec.schedule_checked = True
    elif rec.lr_changes >= 3 and lr <= 1.001e-3 * g0["initial_lr"]:
        rec.schedule_checked = True
        found = _collapsed(opt, rec.steps)
        if found is not None:
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
    for ins in dis.get_instructions(f.f_code):
        if ins.opname in ("LOAD_METHOD", "LOAD_ATTR") and ins.argval == "step" and prev is not None:
            loaded = prev.opname in ("LOAD_NAME", "LOAD_FAST", "LOAD_GLOBAL", "LOAD_DEREF") \
                and prev.argval in names
            attr = prev.opname in ("LOAD_ATTR", "LOAD_METHOD") and prev.argval in attrs \
                and prev2 is not None and prev2.argval == "self"
            if (loaded or attr) and ins.positions is not None and ins.positions.lineno:
                return Site(f.f_code.co_filename, ins.positions.lineno, f.f_code.co_name)
        prev2, prev = prev, ins
    return None


def schedule_findings(data: Any) -> list[Finding]:
    """NOTE [schedule collapsed]."""
    out = []
    for site, name, steps, ratio in data.schedules:
        out.append(make(code_for("epoch-scheduler-stepped-per-batch", "GT526"), site, f"this {name} steps once per optimizer step ({steps} "
                        f"times in the first {steps + 1} steps): its step size counts epochs, "
                        f"so the learning rate is already {ratio:.0e} times its initial value "
                        "and training stalls", fix="call scheduler.step() once per epoch (after "
                        "the batch loop), or give it a step size in iterations",
                        severity="warning"))
    return out
