"""How often a watch records a step: every step while it warms up, then as often as a cost
budget allows.

# NOTE [watch pace]
A recorded step costs a fixed amount of work per parameter (norms, samples, the update
snapshot), which is a few percent of a large model's step but can double the step of a small
one (a 0.5 ms MLP step, a one-state policy). With ``every=None`` (the default) the watch
records the first ``WARM_STEPS`` steps, where most gradient bugs show, and then prices itself
from the clock at the end of every step: ``extra`` is how much longer a recorded step takes
than an unrecorded one (the medians of the last ``_WINDOW`` of each, never less than the time
spent inside the recording work), ``plain`` the median unrecorded step. It then records one
step in ``ceil(extra / (budget * plain))``, counted from the step just priced (not from
step 0: a price moving from 49 to 51 must not record again two steps later), so the
average cost stays near ``budget`` of a step (2% for a watch, 3% for ``trace()``),
re-priced at every recorded step. The price is measured, not assumed: after the warm-up,
steps alternate (one in 2 recorded) until ``PROBES`` unrecorded steps have been timed,
and a model priced at every step still skips one step in ``REPROBE`` to keep the
unrecorded median current. The whole-step difference,
not the time inside the hooks, is what counts: a recorded step also slows its forward (the
forward hook) and the next step (caches). Times are the CPU time of the training thread
(``time.thread_time``), so other jobs on a shared machine do not enter the price, and
medians keep a rare slow step (an evaluation between epochs, a garbage collection) out of
it. A recorded step that finds a non-finite gradient goes back to recording every step.
Between recorded steps the hooks only count the step, and the global forward hook is
removed (it is put back before the next recorded step). A fixed ``every=N`` records one
step in N, as before; ``every=1`` records them all.

Because the price is a measurement, which steps after the warm-up are recorded depends on the
machine's load; a finding must not (NOTE [load-free findings]).

# NOTE [load-free findings]
A tracer's findings must not depend on the machine's load, yet its paced steps do (a loaded
machine times the steps differently, so the price, and with it which steps are armed, moves).
So the steps every finding relies on are chosen by the step count alone: the warm-up (and its
re-warms: a new optimizer, a non-finite gradient) and a floor of armed steps at 2^k and
3 * 2^(k-1) after ``WARM_STEPS`` (24, 32, 48, 64, 96, 128, ...; ``floor_step``), armed
whatever the price. A phase of a run (a second task, an unfreeze at epoch 5, a new loss term)
that starts at step s and lasts more than s / 2 steps holds a floor step, at a cost of two
armed steps per doubling of the run. The paced steps come on top and only add chances.
``GRADTRACE_PACE=every`` or ``=fewest`` in the environment forces the two extremes a price can
reach (every step armed; none but the warm-up and the floor), for the tests and benchmarks
that check that a case's findings are the same at both (tests/runtime/test_runtime32.py,
benchmarks/pace_extremes.py). A fixed ``every=N`` is load-free already and has no floor.

# NOTE [probes unarmed]
A tracer's steps past the warm-up cost what they arm, and a floor step or a probe armed on a
model whose armed step is dear (a REINFORCE episode: +24 ms on 12) is most of that cost. Since
no finding may rely on a step that is neither warm-up nor floor (``fewest`` arms no other), the
tracer arms no step only to price itself: after the warm-up its first ``PROBES`` steps are
unarmed and timed in a row and the price is set at the last of them (``unarmed_probes``; the
warm-up's armed steps already timed the armed side), where the watch alternates recorded and
unrecorded steps as before. And a paced step that falls within half a period before a floor
step waits for it (``Arming.step_end``, ``next_floor``): the floor step arms, re-anchors the pace,
and the paced one is not taken as well. Both remove armed steps that only added chances.

# NOTE [quiet warm-up]
What an armed warm-up step records that an unarmed one cannot is the torch calls of that
step: cuts, creation sites, in-place writes, backward passes, module runs. A training loop
repeats the same calls every step, so after ``QUIET_STEPS`` armed steps a later warm-up step
only adds those again, unless the program changes what it does (a phase) or something already
looks wrong. So a tracer's warm-up (the first, and one a new optimizer starts) ends after
``QUIET_STEPS`` armed steps when (``Arming._quiet``, ``quiet_so_far``) no parameter finding is
pending (the hooks' snapshot), no crash was caught, no optimizer step found no gradient or a
cleared or summed-over one, no optimizer was rebuilt, and every step's signature was the one
before it. The signature is recorded on every step, armed or not, by the optimizer's step
pre-hook, which already visits every parameter: per optimizer, how many parameters hold a
gradient and the grad mode (``OptimizerRecord.sig``). A step whose signature differs before
the warm-up's planned end arms the rest of it again; a non-finite gradient keeps its whole
warm-up. After a quiet first warm-up the floor starts at 12 (12, 16, 24, 32, ...:
``floor_step(step, QUIET_STEPS)``), so the steps 8-15 still hold two armed ones. The decision
reads the step count and the program's own records, never the clock: the findings stay
load-free (NOTE [load-free findings]). A fixed ``every``, ``GRADTRACE_PACE=every`` and a rank
session (armed throughout) keep the whole warm-up; the watch's pace is unchanged.
"""
from __future__ import annotations

import math
import os
import statistics
import time
from collections import deque

WARM_STEPS = 16
QUIET_STEPS = 8  # a tracer's warm-up ends here when nothing suspicious showed (NOTE [quiet warm-up])
MAX_EVERY = 1024
_WINDOW = 9
PROBES = 3  # unrecorded steps timed before the first price
REPROBE = 64  # a model priced at every step skips one step in this many, to time it
clock = time.thread_time  # this thread's CPU time: other jobs on the machine do not count


def floor_step(step: int, warm: int = WARM_STEPS) -> bool:
    """Whether step ``step`` (0-based) is armed whatever the price (NOTE [load-free findings]),
    after a warm-up of ``warm`` steps (NOTE [quiet warm-up]: 12 and 16 after a quiet one)."""
    if step <= warm:
        return False
    odd = step // 3 if step % 3 == 0 else step
    return odd & (odd - 1) == 0


def next_floor(step: int, warm: int = WARM_STEPS) -> int:
    """The first floor step after step ``step`` (NOTE [probes unarmed])."""
    n = max(step, warm) + 1
    power = 1 << (n - 1).bit_length()  # the least power of two >= n
    return 3 * power // 4 if 3 * power // 4 >= n else power


class Pace:
    """The timing state of one watched model."""

    def __init__(self, every: int | None, budget: float, unarmed_probes: bool = False) -> None:
        self.fixed = every
        self.unarmed_probes = unarmed_probes  # NOTE [probes unarmed]: a tracer's pace
        self.probing = False  # timing PROBES unrecorded steps in a row, priced at the last
        self.forced = os.environ.get("GRADTRACE_PACE", "")  # NOTE [load-free findings]
        self.budget = budget
        self.warm = WARM_STEPS  # NOTE [quiet warm-up]: a tracer's ends at QUIET_STEPS when quiet
        self.cost = 0.0  # recording work of the current recorded step (seconds)
        self._last: float | None = None  # clock at the end of step ``_last_step``
        self._last_step = -1
        self._plain_step = 0  # the last step timed unrecorded
        self.anchor = 0  # the last priced recorded step: the next is ``anchor + every``
        self._recorded: deque[float] = deque(maxlen=_WINDOW)  # durations of recorded steps
        self._plain: deque[float] = deque(maxlen=_WINDOW)  # ... and of unrecorded ones
        self._work: deque[float] = deque(maxlen=_WINDOW)  # recording work per recorded step

    def step_end(self, steps: int, every: int, recorded: bool, anomaly: bool = False) -> int:
        """The ``every`` to use from now on, at the end of a step (``steps`` done so far).

        The clock is read only around the steps it prices: the unrecorded step just before a
        recorded one, and the recorded one; the other steps cost a modulo."""
        if not recorded and every > 2 and not self.probing \
                and (steps + 1 - self.anchor) % every and (steps - self.anchor) % every:
            return every
        now = clock()
        if self._last is not None and self._last_step == steps - 1:
            (self._recorded if recorded else self._plain).append(now - self._last)
            if not recorded:
                self._plain_step = steps
        self._last, self._last_step = now, steps
        if not recorded:
            if self.probing and len(self._plain) >= PROBES:  # NOTE [probes unarmed]
                return self._price(steps, every)
            return every
        self._work.append(self.cost)
        self.cost = 0.0
        if self.fixed is not None:
            return self.fixed
        self.anchor = steps - 1  # a new price counts from this step, not from step 0
        if anomaly or steps < self.warm or self.forced == "every":
            return 1
        if self.forced == "fewest":
            return MAX_EVERY
        if not self._recorded:
            return 1
        if len(self._plain) < PROBES:  # price against timed unrecorded steps, not a guess
            if self.unarmed_probes:  # NOTE [probes unarmed]: none armed until priced
                self.probing = True
                return MAX_EVERY
            return 2
        return self._price(steps, every)

    def _price(self, steps: int, every: int) -> int:
        """One recorded step in how many, from the timed steps (NOTE [watch pace])."""
        self.anchor, self.probing = steps - 1, False
        plain = statistics.median(self._plain)
        extra = max(statistics.median(self._work), statistics.median(self._recorded) - plain)
        if plain <= 0:
            return every
        every = min(MAX_EVERY, max(1, math.ceil(extra / (self.budget * plain))))
        if every == 1 and steps - self._plain_step >= REPROBE:
            return 2  # time one unrecorded step now and then
        return every

    def due(self, step: int, every: int) -> bool:
        """Whether step ``step`` (0-based) is one to record."""
        return (step - self.anchor) % every == 0
