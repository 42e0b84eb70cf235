"""Every catalogue entry: its repro raises on the installed torch, the regex matches the real
message, and `gradtrace run` names the line marked `# <- cause` with the right code."""
from __future__ import annotations

import subprocess
import sys

import pytest

from gradtrace.codes import TABLE
from gradtrace.runtime.catalogue import PATTERNS, explain_message, match_message

from rt_helpers import marked_line, raise_plain

WITH_REPRO = [p for p in PATTERNS if p.repro.strip()]


@pytest.mark.parametrize("pat", WITH_REPRO, ids=[p.key for p in WITH_REPRO])
def test_regex_matches_real_message(pat, tmp_path):
    exc = raise_plain(pat.repro, tmp_path)
    text = f"{type(exc).__name__}: {exc}"
    assert pat.search(text), text
    assert match_message(text)[0].key == pat.key


@pytest.mark.parametrize("pat", WITH_REPRO, ids=[p.key for p in WITH_REPRO])
def test_run_names_the_cause_line(pat, run_script):
    res = run_script(pat.repro)
    assert res.code == 1
    assert res.findings, res.err
    first = res.findings[0]
    assert first["line"] == marked_line(pat.repro), (first, res.err)
    assert first["code"] == expected_code(pat)
    assert first["source"] in ("runtime", "static+runtime")
    assert "Traceback (most recent call last)" in res.err


def expected_code(pat) -> str:
    from gradtrace.runtime.build import code_for

    kinds = {"element0": "detach", "grad-none-zero": "leaf-rebound-by-update",
             "non-scalar": "non-scalar", "backward-twice": "state-carried-across-steps",
             "inplace-saved": "inplace-on-saved-tensor", "inplace-leaf": "inplace-on-leaf",
             "detached-saved": "inplace-on-saved-tensor",
             "number-backward": "item-then-backward", "numpy-grad": "numpy-on-grad-tensor",
             "inference-saved": "inference-tensor", "none-assigned": "none-result-assigned",
             "optimizer-empty": "parameters-generator-consumed",
             "optimizer-non-leaf": "optimizer-non-leaf",
             "function-grad-count": "function-grad-count",
             "grad-unused-input": "grad-input-unused",
             "non-leaf-grad-warning": "non-leaf-grad",
             "requires-grad-dtype": "requires-grad-on-integer",
             "requires-grad-non-leaf": "requires-grad-on-non-leaf",
             "module-attribute": "module-attribute-rejected",
             "param-two-groups": "parameter-in-two-groups",
             "out-requires-grad": "out-argument-requires-grad",
             "legacy-function": "legacy-autograd-function",
             "grad-shape": "backward-gradient-shape",
             "optimizer-state-groups": "optimizer-state-mismatch"}
    if pat.diagnosis:  # an entry whose finding is a diagnosis of its own
        return pat.diagnosis
    return code_for(kinds.get(pat.key, pat.twin), pat.code)  # the crash entries: twin or own


def test_codes_are_runtime_range_and_kebab():
    from gradtrace.code_tables import trace

    for c in trace.CODES:
        assert c.code.startswith("GT8") and 800 <= int(c.code[2:]) <= 849
        assert c.name == c.name.lower() and " " not in c.name and c.summary
    assert {p.code for p in PATTERNS} <= {c.code for c in trace.CODES}
    assert {p.diagnosis for p in PATTERNS if p.diagnosis} <= set(TABLE)
    assert all(TABLE[p.code].producer.startswith("gradtrace.runtime.") for p in PATTERNS)


def test_explain_message_known_and_unknown():
    found = explain_message("RuntimeError: element 0 of tensors does not require grad and does "
                            "not have a grad_fn")
    assert [f.code for f in found] == ["GT800"]
    assert found[0].source == "runtime" and found[0].fix is not None
    assert explain_message("ValueError: something unrelated") == []


def test_catalogue_imports_without_torch():
    code = ("import sys; import gradtrace.runtime.catalogue as c; "
            "import gradtrace.runtime.runner, gradtrace.runtime.trace.tracer, gradtrace.runtime.render; "
            "import gradtrace.runtime.trace.explain, gradtrace.runtime.trace.ipython; "
            "c.explain_message('x'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
