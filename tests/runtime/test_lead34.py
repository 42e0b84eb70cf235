"""Session 34, lead: a custom Function's backward that returns None where `.apply` is handed a
learned Parameter. The run sees the None (GT845, on the `backward`); the static GT724 names the
`.apply` call, the line to change, and leads once the fuse knows it explains GT845. Real torch."""
from __future__ import annotations

import json
import os

import torch

from gradtrace.findings import Finding, Related
from gradtrace.runtime import fuse

CASES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "realworld", "cases")


def test_a_static_gt724_explains_the_runtime_gt845_and_leads():
    static = [Finding("GT724", "function-drops-parameter-gradient", "s", "/x/t.py", 44, 12)]
    runtime = [Finding("GT845", "function-backward-returns-none", "r", "/x/t.py", 38, 9,
                       related=(Related("/x/t.py", 44, "apply"),))]
    out = fuse.fuse(runtime, static, {"/x/t.py": [(1, 90)]})
    assert (out[0].code, out[0].line, out[0].source) == ("GT724", 44, "static+runtime")


def test_torchao_range_learning_names_the_apply(tmp_path):
    from gradtrace.runtime.runner import main

    dest = str(tmp_path / "out.json")
    case = os.path.join(CASES, "autograd_api",
                        "torchao_qat_range_learning_fake_quantize_function_drops_scale_grads.py")
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        main(["--quiet", "--json-out", dest, case])
    finally:
        os.chdir(cwd)
        torch.set_grad_enabled(True)
    with open(dest, encoding="utf-8") as fh:
        bug = json.load(fh)["findings"]
    assert (bug[0]["code"], bug[0]["line"], bug[0]["source"]) == ("GT724", 44, "static+runtime")
