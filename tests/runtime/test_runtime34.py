"""Session 34, runtime: the fused line of a crash (NOTE [cause on the crash line] in
gradtrace.runtime.fuse) and the quiet warm-up (NOTE [quiet warm-up] in gradtrace.runtime.pace)."""
from __future__ import annotations

import json
import os

import torch

from gradtrace.findings import Finding, Related
from gradtrace.runtime import fuse

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
