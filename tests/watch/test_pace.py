"""NOTE [watch pace]: with every=None a watch records the first steps, then as often as its
cost budget allows; a non-finite gradient brings it back to every step."""
from __future__ import annotations

import itertools
import time

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.runtime import pace as pace_module
from gradtrace.runtime.pace import REPROBE, WARM_STEPS, Pace
from gradtrace.runtime.watch import watcher as watcher_module


def _small() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                      nn.Linear(32, 2))
    return m, torch.optim.SGD(m.parameters(), lr=0.01)


def _train(m: nn.Module, opt: torch.optim.Optimizer, steps: int, bad_at: int = -1) -> None:
    crit = nn.MSELoss()
    for i in range(steps):
        opt.zero_grad()
        x = torch.randn(8, 32)
        if i == bad_at:
            x[0, 0] = float("inf")
        crit(m(x), torch.zeros(8, 2)).backward()
        opt.step()


def test_pace_arithmetic() -> None:
    p = Pace(None, budget=0.05)
    assert p.step_end(1, 1, True) == 1  # nothing timed yet
    # recorded steps of 3 ms, unrecorded ones of 2 ms: (3 - 2) / (0.05 * 2) = 10
    p._recorded.extend([0.003] * 3)
    p._plain.extend([0.002] * 3)
    p._work.extend([0.0005] * 3)
    p._last = time.thread_time() - 0.003
    p.cost = 0.0005
    assert p.step_end(WARM_STEPS, 1, True) in range(10, 12)
    assert p.step_end(WARM_STEPS + 1, 10, False) == 10  # unrecorded steps keep it
    assert p.step_end(WARM_STEPS + 2, 10, True, anomaly=True) == 1
    assert Pace(7, 0.03).step_end(100, 1, True) == 7


def test_the_price_is_measured_on_unrecorded_steps() -> None:
    """A recorded step whose own work is cheap is not assumed cheap: unrecorded steps are
    timed first (one in 2 recorded), and a step priced at every step still skips one in
    REPROBE to time it."""
    p = Pace(None, budget=0.02)
    p._recorded.extend([0.100] * 3)
    p._work.extend([0.001] * 3)  # 1 ms of hook work in a 100 ms step
    p._last, p._last_step = time.thread_time(), WARM_STEPS - 1
    assert p.step_end(WARM_STEPS, 1, True) == 2  # no unrecorded step timed yet
    p._plain.extend([0.096] * 3)  # ... timed: a recorded step costs 4 ms, not 1
    p._plain_step = WARM_STEPS + 1
    p._recorded.extend([0.100] * 9)
    p._last, p._last_step = time.thread_time() - 0.1, WARM_STEPS + 1
    assert p.step_end(WARM_STEPS + 2, 2, True) == 3  # ceil(4 / (0.02 * 96))
    p._recorded.extend([0.097] * 9)  # now 1 ms: every step, until REPROBE steps later
    p._last, p._last_step = time.thread_time() - 0.097, WARM_STEPS + 2
    assert p.step_end(WARM_STEPS + 3, 3, True) == 1
    p._last, p._last_step = time.thread_time() - 0.097, REPROBE + WARM_STEPS
    assert p.step_end(REPROBE + WARM_STEPS + 1, 1, True) == 2


def test_small_model_records_the_warm_steps_then_fewer() -> None:
    m, opt = _small()
    with gradtrace.watch(m, opt) as w:
        _train(m, opt, 200)
    t = w.report.tracks[0]
    recorded = [s.step for s in t.steps]
    assert recorded[:WARM_STEPS] == list(range(WARM_STEPS))
    assert t.total_steps == 200
    assert WARM_STEPS < t.recorded_steps < 150  # a small model: most steps unrecorded
    assert t.every > 1
    assert w.report.meta["every"] == "auto"
    # nothing left behind: no global forward hook after the watch
    assert not any(getattr(h, "__self__", None) is w
                   for h in torch.nn.modules.module._global_forward_hooks.values())


def test_fixed_every_and_bits_unchanged() -> None:
    m, opt = _small()
    twin, twin_opt = _small()
    torch.manual_seed(1)
    _train(twin, twin_opt, 40)
    torch.manual_seed(1)
    with gradtrace.watch(m, opt, every=4) as w:
        _train(m, opt, 40)
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), twin.parameters()))
    assert [s.step for s in w.report.tracks[0].steps] == list(range(0, 40, 4))
    assert w.report.tracks[0].recorded_steps == 10


def test_a_nonfinite_gradient_brings_back_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock is simulated, 1 ms per read, so the price never depends on the machine's load:
    a recorded step reads it around each piece of hook work and so costs more than an
    unrecorded one (a price of 2 or more at a budget of a whole step)."""
    ticks = itertools.count()

    def clock() -> float:
        return next(ticks) * 1e-3

    monkeypatch.setattr(pace_module, "clock", clock)
    monkeypatch.setattr(watcher_module, "clock", clock)
    m, opt = _small()
    with gradtrace.watch(m, opt, budget=1.0) as w:
        _train(m, opt, 200)
        every = w._bound[0].collector.every
        assert 1 < every < 25
        _train(m, opt, 200, bad_at=100)  # step 300 makes the weights NaN for good
    t = w.report.tracks[0]
    first = t.summaries[0].first_nonfinite_step
    assert first is not None and 300 <= first <= 300 + every
    after = [s.step for s in t.steps if s.step >= first]
    assert after == list(range(first, 400))  # every step recorded from then on


def test_budget_is_checked() -> None:
    m, _ = _small()
    with pytest.raises(ValueError, match="budget"):
        gradtrace.watch(m, budget=0)


def test_a_new_price_counts_from_the_step_priced() -> None:
    """Re-pricing to N at step s records step s - 1 + N next, not the next multiple of N (a
    price that moves from 49 to 51 would otherwise record two steps apart)."""
    p = Pace(None, budget=0.02)
    p._recorded.extend([0.003] * 9)
    p._plain.extend([0.002] * 9)
    p._plain_step = 1000
    p._last, p._last_step = time.thread_time(), 1003
    every = p.step_end(1004, 2, True)  # the step of index 1003 was recorded
    assert every == 25 and p.anchor == 1003  # ceil(1 ms / (0.02 * 2 ms))
    due = [i for i in range(1004, 1200) if p.due(i, every)]
    assert due[:3] == [1028, 1053, 1078]  # not 1025, the next multiple of 25
    assert Pace(4, 0.02).due(8, 4) and not Pace(4, 0.02).due(9, 4)  # fixed every: from 0
