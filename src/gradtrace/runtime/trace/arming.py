"""When ``trace()`` records every torch call: the first optimizer steps, then sampled ones.

# NOTE [trace arming]
The provenance mode (NOTE [hot path]) costs a fixed price per torch call: a few percent of a
large model's step, but close to twice a small one's (a 0.5 ms MLP step, a one-state policy).
Most gradient bugs show on the first optimizer steps, so a tracer is *armed* (its mode on the
torch-function stack: every call recorded) for the first ``WARM_STEPS`` optimizer steps (the
first ``QUIET_STEPS`` when they showed nothing suspicious: NOTE [quiet warm-up]), and
after that for one step in N, N priced as a watch prices its recorded steps
(NOTE [watch pace]): the median armed step against the median unarmed one, so that arming costs about
``budget`` (3% by default) of a step, plus a floor of steps armed by their count alone
(NOTE [load-free findings]). Between armed steps the mode is off the stack and so is
the global module hook (any global module hook sends every module call down torch's slow
path); the optimizer hooks stay and see every step (which parameters got gradients,
non-finite gradients on due steps). Module facts are therefore those of armed steps: a
parameter without a gradient whose module was never seen running is reported without the
claim that its module never ran. A non-finite gradient
or an optimizer seen for the first time arms every step again for ``WARM_STEPS`` steps.

The switch happens in the optimizer's step post-hook, on the thread that entered the tracer,
and only while the mode is on top of the stack (a mode the user pushed above ours keeps the
tracer armed). A program that never calls ``optimizer.step()`` is armed throughout; so is a
rank of a multi-process launch (its rank session counts backward passes per DDP forward), and
``every=1``.
When the grad mode changed while unarmed, the grad-off site recorded before is forgotten.

Inside ``optimizer.step()`` (between the step pre- and post-hooks) the mode records nothing
(the optimizer's internals are not the user's code), so an armed tracer takes its mode off the
stack there too: the optimizer's and the hooks' own reads of ``p.grad`` (about six per
parameter) no longer go through it. Not for ``step(closure)`` (the closure runs the user's
forward), nor when another mode is above ours; the post-hook puts it back (a forward run
inside the step, e.g. a watch's NaN replay, stays unrecorded as before). After a step that
raised, the next step's post-hook or the tracer's exit does.

A crash on an unarmed step still gets the diagnosis from the error's message and traceback,
the static findings on the code that ran (NOTE [ranking]) and the hooks' facts; it does not get
the line where a value was cut or modified in place during that step.

From its entry to the end of the first ``RAN_STEPS`` optimizer steps (outside the optimizer's
own work) the tracer also records which functions start, for the fuse (NOTE [code that ran] in
:mod:`gradtrace.runtime.ran`; with ``sys.monitoring``, 3.12+, for the whole session).
"""
from __future__ import annotations

import threading
from typing import Any

import torch

from gradtrace.runtime.pace import QUIET_STEPS, WARM_STEPS, Pace, floor_step, next_floor
from gradtrace.runtime.ran import PAUSED, RAN_STEPS, RanRecorder, resume_after_import


class Arming:
    """Puts a tracer's mode on the stack for armed steps and takes it off between them."""

    def __init__(self, mode: Any, state: Any, hooks: Any, every: int | None,
                 budget: float) -> None:
        self.mode = mode
        self.hooks = hooks
        self.state = state
        self.pace = Pace(every, budget, unarmed_probes=True)  # NOTE [probes unarmed]
        self.always = every == 1
        self.every = 1
        self.steps = 0
        self.warm_until = WARM_STEPS
        self.quiet_at: int | None = QUIET_STEPS  # NOTE [quiet warm-up]: the step it is decided
        self.quiet_until = 0  # ... and the end of the warm-up it cut short
        self.floor_warm = WARM_STEPS
        self.armed = False
        self.thread = 0
        self._grad_at_disarm = True
        self.popped = False  # the mode is off the stack for an optimizer step's own work
        self.hunted = False  # ... or on, for a hunted step (NOTE [NaN made by a step])
        self.ran = RanRecorder()  # the functions that start (NOTE [code that ran])

    # -- the tracer's block --------------------------------------------------------------------
    def enter(self) -> None:
        self.thread = threading.get_ident()
        self.ran.thread = self.thread
        self.mode.__enter__()
        self.armed = True
        self.ran.start()

    def exit(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.ran.close()
        if self.popped:  # a step raised: the mode is already off the stack
            self.popped = False
            _POPPED.clear()
            self.armed = False
        if self.armed:
            self.armed = False
            self.mode.__exit__(exc_type, exc, tb)

    # -- inside optimizer.step() ---------------------------------------------------------------
    def step_start(self, closure: bool, hunt: bool = False) -> None:
        """Take the mode off the stack for the optimizer's own work (see the NOTE); a hunted
        step keeps it on (NOTE [NaN made by a step]), the code that ran is not recorded."""
        if self.armed and not closure and not _POPPED \
                and threading.get_ident() == self.thread and _on_top(self.mode):
            if hunt:
                self.hunted = True
            else:
                self.mode.__exit__(None, None, None)
                self.popped = True
                _POPPED.append(self.mode)
            self.ran.stop()

    def resume(self) -> None:
        """Put the mode back after a step's own work (the step ended, or raised)."""
        if self.popped and threading.get_ident() == self.thread:
            self.popped = False
            _POPPED.clear()
            self.mode.__enter__()
            if self.steps < RAN_STEPS:
                self.ran.start()

    # -- the optimizer's step post-hook -------------------------------------------------------
    def step_end(self, new_optimizer: bool = False, anomaly: bool = False) -> None:
        """Count one optimizer step and arm or disarm the next one."""
        if threading.get_ident() != self.thread:
            return
        if PAUSED:  # NOTE [imports unrecorded]
            resume_after_import()
        if self.popped:
            self.resume()
        elif self.hunted:
            self.hunted = False
            if self.steps < RAN_STEPS:
                self.ran.start()
        armed, steps = self.armed, self.steps
        self.steps = steps = steps + 1
        if steps == RAN_STEPS:
            self.ran.first_steps_done()
        if anomaly:
            self.warm_until = max(self.warm_until, steps + WARM_STEPS)
            self.quiet_at = None
        elif new_optimizer:  # its first step counts as one of its warm-up steps
            if steps - 1 + WARM_STEPS > self.warm_until:
                self.warm_until = steps - 1 + WARM_STEPS
                self.quiet_at = self.warm_until - WARM_STEPS + QUIET_STEPS
        self._quiet(steps)
        every = self.pace.step_end(steps, self.every, armed, anomaly)
        if self.always or steps < self.warm_until:
            every = 1
        self.every = every
        want = self.pace.due(steps, every)
        if self.pace.fixed is None:  # NOTE [load-free findings]; NOTE [probes unarmed]
            if floor_step(steps, self.floor_warm):
                want = True
            elif want and every > 1 and steps >= self.warm_until \
                    and next_floor(steps, self.floor_warm) - steps <= every // 2:
                want = False  # the floor step just ahead arms instead
        if want != armed:
            self._switch(want)

    def _quiet(self, steps: int) -> None:
        """End the warm-up at ``quiet_at`` when nothing suspicious showed; arm its rest again
        when a step's signature changes before its planned end (NOTE [quiet warm-up])."""
        data = self.hooks.data
        changed, data.sig_changed = data.sig_changed, False
        if steps < self.quiet_until and changed:
            self.warm_until, self.quiet_until = self.quiet_until, 0
            if self.floor_warm < WARM_STEPS and steps < WARM_STEPS:
                self.floor_warm = self.pace.warm = WARM_STEPS
            return
        if steps != self.quiet_at:
            if changed and self.quiet_at is not None and steps < self.quiet_at:
                self.quiet_at = None  # the warm-up already saw a change: it runs whole
            return
        self.quiet_at = None
        if self.always or changed or self.pace.fixed is not None \
                or self.pace.forced == "every" or not quiet_so_far(self.state, data):
            return
        self.quiet_until, self.warm_until = self.warm_until, steps
        if steps < WARM_STEPS:  # the first warm-up (two optimizers: 9): the floor starts at 12
            self.floor_warm = self.pace.warm = QUIET_STEPS

    def arm(self) -> None:
        """Arm now, mid-step."""
        if threading.get_ident() == self.thread and not self.armed:
            self._switch(True)

    def _switch(self, on: bool) -> None:
        if on:
            self.mode.__enter__()
            self.armed = True
            self.hooks.module_hook(True)
            if torch.is_grad_enabled() != self._grad_at_disarm:
                self.state.grad_off = None  # switched while unarmed: the old site is stale
            return
        if _POPPED or not _on_top(self.mode):  # (another tracer's mode is off the stack)
            return
        self.mode.__exit__(None, None, None)
        self.armed = False
        self.hooks.module_hook(False)
        self._grad_at_disarm = torch.is_grad_enabled()


def quiet_so_far(state: Any, data: Any) -> bool:
    """Whether the armed warm-up steps so far showed nothing a later warm-up step could add
    to (NOTE [quiet warm-up]): no parameter finding pending, no crash caught, no optimizer
    step that found no gradient, a cleared or summed-over gradient, or a rebuilt optimizer."""
    if data.snapshot or state.crash_findings:
        return False
    return not any(r.empty_steps or r.frozen_steps or r.accumulate_site is not None
                   or r.wiped is not None or r.nonfinite is not None or r.rebuilt
                   for r in data.optimizers.values())


_POPPED: list[Any] = []  # the mode a tracer took off the stack for a step (at most one)


def _on_top(mode: Any) -> bool:
    """Whether ``mode`` is the innermost torch-function mode (private API: False if absent)."""
    try:
        n = torch._C._len_torch_function_stack()
        return n > 0 and torch._C._get_function_stack_at(n - 1) is mode
    except (AttributeError, RuntimeError):
        return False
