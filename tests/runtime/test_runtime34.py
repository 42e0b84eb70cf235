"""Session 34, runtime: the fused line of a crash (NOTE [cause on the crash line] in
gradtrace.runtime.fuse) and the quiet warm-up (NOTE [quiet warm-up] in gradtrace.runtime.pace)."""
from __future__ import annotations

import json
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import gradtrace
from gradtrace.findings import Finding, Related
from gradtrace.runtime import fuse
from gradtrace.runtime.pace import QUIET_STEPS, WARM_STEPS, floor_step

CASES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "realworld", "cases")


# -- the fused line ----------------------------------------------------------------------------
def _step_between_backwards(static_line: int) -> list[Finding]:
    """The run names optimizer.step() (line 75), the backward() that raised (79) as context;
    the static GT601 sits on ``static_line``."""
    static = [Finding("GT601", "optimizer-step-between-backwards", "s", "/x/t.py", static_line, 5)]
    runtime = [Finding("GT601", "optimizer-step-between-backwards", "r", "/x/t.py", 75, 5,
                       related=(Related("/x/t.py", 79, "backward() failed here"),))]
    return fuse.fuse(runtime, static, {"/x/t.py": [(1, 90)]}, crash_line=("/x/t.py", 79))


def test_a_static_finding_on_the_crash_line_that_explains_it_leads():
    out = _step_between_backwards(79)
    assert (out[0].code, out[0].line, out[0].source) == ("GT601", 79, "static+runtime")
    assert any(r.line == 75 and r.message.startswith(fuse.CONFIRMED) for r in out[0].related)


def test_a_static_finding_on_the_step_line_is_the_same_bug_seen_from_the_step():
    out = _step_between_backwards(75)
    assert (out[0].code, out[0].line, out[0].source) == ("GT601", 75, "static+runtime")


def test_an_exact_runtime_line_keeps_a_helper_write_on_the_crash_line_as_context():
    """e2cnn: the run names the call of the init helper (the line to wrap in no_grad), the
    static GT302 the in-place write inside the helper, where the program crashed."""
    static = [Finding("GT302", "leaf-inplace", "s", "/x/t.py", 39, 5)]
    runtime = [Finding("GT302", "leaf-inplace", "r", "/x/t.py", 45, 5,
                       related=(Related("/x/t.py", 39, "the in-place write"),))]
    out = fuse.fuse(runtime, static, {"/x/t.py": [(1, 90)]}, crash_line=("/x/t.py", 39))
    assert (out[0].code, out[0].line) == ("GT302", 45)


def _run_case(path: str, tmp_path) -> list[dict]:
    from gradtrace.runtime.runner import main

    dest = str(tmp_path / "out.json")
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        main(["--quiet", "--json-out", dest, os.path.join(CASES, path)])
    finally:
        os.chdir(cwd)
        torch.set_grad_enabled(True)
    with open(dest, encoding="utf-8") as fh:
        return json.load(fh)["findings"]


def test_infomaxvae_names_the_backward_the_maintainer_changed(tmp_path):
    bug = _run_case("inplace/infomaxvae_discriminator_backward_after_vae_step.py", tmp_path)
    assert (bug[0]["code"], bug[0]["line"], bug[0]["source"]) == ("GT601", 79, "static+runtime")
    ok = _run_case("inplace/infomaxvae_discriminator_backward_restricted_to_disc_parameters_ok.py",
                   tmp_path)
    assert ok == []


# -- the quiet warm-up -------------------------------------------------------------------------
def _loop(steps: int, tracer=None, unfreeze_at: int | None = None, unused: bool = False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    extra = nn.Linear(6, 3)  # never called when ``unused``: its parameters get no gradient
    if unfreeze_at is not None:
        model[0].requires_grad_(False)
    opt = torch.optim.SGD([*model.parameters(), *(extra.parameters() if unused else ())], lr=0.1)
    x, y = torch.randn(12, 6), torch.randint(0, 3, (12,))
    armed = []
    for step in range(steps):
        if step == unfreeze_at:
            model[0].requires_grad_(True)
        armed.append(tracer is not None and tracer.arming.armed)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [i for i, a in enumerate(armed) if a], [p.detach().clone() for p in model.parameters()]


def _traced(monkeypatch, pace: str, **kw):
    monkeypatch.setenv("GRADTRACE_PACE", pace)
    with gradtrace.trace(static=False) as tr:
        armed, bits = _loop(70, tr, **kw)
    return armed, bits, tr


def test_a_quiet_warm_up_ends_after_eight_steps_and_the_floor_starts_at_twelve(monkeypatch):
    _, plain = _loop(70)
    armed, traced, _ = _traced(monkeypatch, "fewest")
    assert armed == [*range(QUIET_STEPS), 12, 16, 24, 32, 48, 64]
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))
    assert [s for s in range(70) if floor_step(s, QUIET_STEPS)] == [12, 16, 24, 32, 48, 64]


def test_a_step_whose_signature_changes_arms_the_rest_of_the_warm_up(monkeypatch):
    """The first layer is unfrozen at step 10 (two more parameters hold a gradient): the
    warm-up's steps 11-15 (the change is seen at step 10's end) are armed again."""
    _, plain = _loop(70, unfreeze_at=10)
    armed, traced, _ = _traced(monkeypatch, "fewest", unfreeze_at=10)
    assert armed == [*range(QUIET_STEPS), *range(11, WARM_STEPS), 24, 32, 48, 64]
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))


def test_a_pending_parameter_finding_keeps_the_whole_warm_up(monkeypatch):
    armed, _, tr = _traced(monkeypatch, "fewest", unused=True)
    assert armed[:WARM_STEPS] == list(range(WARM_STEPS))
    assert tr.findings  # the unused layer's parameters never received a gradient


@pytest.mark.parametrize("how", ["every=1", "GRADTRACE_PACE=every"])
def test_every_step_armed_keeps_the_whole_warm_up(monkeypatch, how):
    if how == "every=1":
        monkeypatch.delenv("GRADTRACE_PACE", raising=False)
        with gradtrace.trace(static=False, every=1) as tr:
            armed, _ = _loop(30, tr)
    else:
        monkeypatch.setenv("GRADTRACE_PACE", "every")
        with gradtrace.trace(static=False) as tr:
            armed, _ = _loop(30, tr)
    assert armed == list(range(30))
