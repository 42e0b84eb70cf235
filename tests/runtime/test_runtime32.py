"""Findings that do not depend on the machine's load (NOTE [load-free findings]): the same at
both extremes of the pace (``GRADTRACE_PACE=every`` / ``=fewest``), a later phase of a run
found on the floor of armed steps; and library imports left out of the 3.11 function-entry
recorder (NOTE [imports unrecorded]). Real torch."""
from __future__ import annotations

import importlib
import json
import os
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import gradtrace
from gradtrace.runtime import ran
from gradtrace.runtime.pace import QUIET_STEPS, WARM_STEPS, floor_step

CASES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "realworld", "cases")


def test_the_floor_is_two_steps_a_doubling_from_the_warm_up_on():
    assert [s for s in range(800) if floor_step(s)] == [
        24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768]
    assert WARM_STEPS == 16


def _train(steps: int, tracer=None, second_from: int = -1, cut: bool = False):
    """A small model; from step ``second_from`` on a distillation term is added whose current
    outputs are computed under no_grad (avalanche's LwF bug when ``cut``)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    old = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(12, 6), torch.randint(0, 3, (12,))
    armed = []
    for i in range(steps):
        armed.append(tracer is not None and tracer.arming.armed)
        out = model(x)
        loss = F.cross_entropy(out, y)
        if i >= second_from >= 0:
            with torch.no_grad():
                prev = old(x)
                if cut:
                    out = model(x)
            loss = loss + F.kl_div(torch.log_softmax(out, 1), torch.softmax(prev, 1),
                                   reduction="batchmean")
        opt.zero_grad()
        loss.backward()
        opt.step()
    return armed, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("pace", ["fewest", "every"])
def test_the_extremes_of_the_pace_arm_the_floor_or_every_step_and_keep_the_bits(
        monkeypatch, pace):
    _, plain = _train(140)
    monkeypatch.setenv("GRADTRACE_PACE", pace)
    with gradtrace.trace(static=False) as tr:
        armed, traced = _train(140, tr)
    if pace == "every":
        assert all(armed)
    else:
        assert [i for i, a in enumerate(armed) if a] == list(range(QUIET_STEPS)) + [
            12, 16, 24, 32, 48, 64, 96, 128]  # NOTE [quiet warm-up]
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))


@pytest.mark.parametrize("cut", [True, False])
def test_a_phase_after_the_warm_up_gives_the_same_findings_at_both_extremes(monkeypatch, cut):
    found = {}
    for pace in ("every", "fewest", ""):
        monkeypatch.setenv("GRADTRACE_PACE", pace)
        with gradtrace.trace(static=False) as tr:
            _train(120, tr, second_from=60, cut=cut)
        found[pace] = sorted((f.code, f.line) for f in tr.findings)
    assert found["every"] == found["fewest"] == found[""]
    assert any(code == "GT844" for code, _ in found["every"]) == cut


# cases whose findings could hang on a later step: a second task's loss term (grad_mode), its
# look-alike, a look-alike whose post-loop code ran armed or not (runtime31), a layer unfrozen
# after the optimizer was built (freezing), gradients zeroed once before all epochs (loop_order)
EXTREME_CASES = [
    "grad_mode/avalanche_lwf_current_multitask_outputs_under_no_grad.py",
    "grad_mode/avalanche_lwf_current_multitask_outputs_with_grad_ok.py",
    "grad_mode/tinyllava_clip_vision_tower_forward_with_grad_ok.py",
    "freezing/unfreeze_after_optimizer_built.py",
    "loop_order/corr_prediction_zero_grad_once_before_all_epochs.py",
]


def _run_case(path: str, tmp_path, pace: str) -> list[tuple[str, int]]:
    from gradtrace.runtime.runner import main

    dest = str(tmp_path / f"{pace}.json")
    os.environ["GRADTRACE_PACE"] = pace
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        main(["--quiet", "--json-out", dest, os.path.join(CASES, path)])
    finally:
        os.chdir(cwd)
        del os.environ["GRADTRACE_PACE"]
        torch.set_grad_enabled(True)
    with open(dest, encoding="utf-8") as fh:
        return sorted((f["code"], f["line"]) for f in json.load(fh)["findings"])


@pytest.mark.parametrize("case", EXTREME_CASES)
def test_real_world_cases_give_the_same_findings_at_both_extremes(tmp_path, case):
    every = _run_case(case, tmp_path, "every")
    assert _run_case(case, tmp_path, "fewest") == every
    assert bool(every) == ("_ok" not in case)


# -- imports under the function-entry recorder (before 3.12) ------------------------------------
needs_settrace = pytest.mark.skipif(
    hasattr(sys, "monitoring") or sys.gettrace() is not None or sys.getprofile() is not None,
    reason="sys.monitoring records without settrace, or another trace function is installed")

USER_MODULE = """
def built_at_import():
    return 3


VALUE = built_at_import()
"""


def _torch_free_helper():
    return 1


@needs_settrace
def test_a_library_import_pauses_the_recorder_and_a_user_module_does_not(tmp_path, monkeypatch):
    (tmp_path / "user_mod_r32.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("colorsys", None)
    sys.modules.pop("user_mod_r32", None)
    model = nn.Linear(3, 2)
    with gradtrace.trace() as tr:
        assert sys.gettrace() is ran._call
        importlib.import_module("colorsys")  # a library module's body: unrecorded
        assert ran.PAUSED and sys.gettrace() is None
        model(torch.randn(2, 3))  # the next torch call puts the recorder back
        assert not ran.PAUSED and sys.gettrace() is ran._call
        _torch_free_helper()
        importlib.import_module("user_mod_r32")  # a user module: recorded
        assert not ran.PAUSED
        codes = list(tr.arming.ran.codes.values())
    names = {c.co_name for c in codes}
    assert sys.gettrace() is None and not ran.PAUSED
    assert {"_torch_free_helper", "built_at_import"} <= names
    assert "hsv_to_rgb" not in names and "rgb_to_hsv" not in names


@needs_settrace
def test_an_import_at_the_end_of_the_session_leaves_nothing_installed():
    sys.modules.pop("colorsys", None)
    with gradtrace.trace():
        importlib.import_module("colorsys")
        assert ran.PAUSED
    assert sys.gettrace() is None and not ran.PAUSED
