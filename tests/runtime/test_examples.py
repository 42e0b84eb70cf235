"""Each bundled example is diagnosed by `gradtrace run` at the line marked `# <- cause`, with
the expected code; the correct script yields no finding."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gradtrace.runtime.build import code_for
from gradtrace.runtime.runner import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "runtime"

# example -> (kind used for the static twin, runtime code, exit code)
EXPECT = {
    "detach_before_loss.py": ("detach", "GT800", 1),
    "item_rewrapped.py": ("item-rewrap", "GT800", 1),
    "no_grad_forward.py": ("no-grad-forward", "GT800", 1),
    "grad_mode_left_off.py": ("grad-mode-left-off", "GT800", 1),
    "argmax_loss.py": ("non-differentiable-op", "GT800", 1),
    "all_frozen.py": ("all-parameters-frozen", "GT800", 1),
    "manual_sgd_rebind.py": ("leaf-rebound-by-update", "GT801", 1),
    "rnn_hidden_not_detached.py": ("state-carried-across-steps", "GT803", 1),
    "gan_fake_not_detached.py": ("gan-fake-not-detached", "GT803", 1),
    "inplace_after_sigmoid.py": ("inplace-on-saved-tensor", "GT804", 1),
    "leaf_inplace_update.py": ("inplace-on-leaf", "GT805", 1),
    "item_then_backward.py": ("item-then-backward", "GT806", 1),
    "vector_loss.py": ("non-scalar", "GT802", 1),
    "inference_mode_features.py": ("inference-tensor", "GT808", 1),
    "optimizer_reassigned.py": ("none-result-assigned", "GT813", 1),
    "layers_in_plain_list.py": ("unregistered-submodule", "GT821", 0),
    "model_recreated_after_optimizer.py": ("model-recreated-after-optimizer", "GT821", 0),
    "zero_grad_missing.py": ("zero-grad-missing", "GT823", 0),
    "clip_after_step.py": ("clip-after-step", "GT824", 0),
    "encoder_detached.py": ("detach", "GT820", 0),
    "unused_layer.py": ("unused-parameter", "GT820", 0),
    "nonleaf_grad_read.py": ("weight-made-non-leaf", "GT822", 0),
    "total_loss_graph.py": ("graph-kept", "GT826", 0),
    "nan_gradient.py": ("non-finite-gradient", "GT825", 0),
    "checkpoint_no_grad.py": ("checkpoint-no-grad", "GT820", 0),
    "zero_learning_rate.py": ("parameters-never-change", "GT828", 0),
    "tensor_attribute_not_parameter.py": ("learnable-tensor-attribute", "GT821", 0),
}


def _run(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list, str]:
    out = tmp_path / "f.json"
    code = main(["--json-out", str(out), str(EXAMPLES / name)])
    err = capsys.readouterr().err
    return code, json.loads(out.read_text())["findings"], err


def test_every_example_is_listed():
    names = {p.name for p in EXAMPLES.glob("*.py")} - {"correct_training.py"}
    assert names == set(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example_diagnosed_at_cause_line(name, tmp_path, capsys):
    kind, code, exit_code = EXPECT[name]
    text = (EXAMPLES / name).read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if "# <- cause" in t)
    rc, findings, err = _run(name, tmp_path, capsys)
    assert rc == exit_code, err
    assert findings, err
    first = findings[0]
    assert (first["code"], first["line"]) == (code_for(kind, code), line), err
    assert first["path"].endswith(name) and first["source"] in ("runtime", "static+runtime")
    assert re.search(rf"{re.escape(name)}:{line}:\d+: {first['code']}", err), err
    col, src = first["column"], text[line - 1]  # the call's (or statement's) column
    assert len(src) - len(src.lstrip()) < col <= len(src) and not src[col - 1].isspace()


def test_correct_training_has_no_finding(tmp_path, capsys):
    rc, findings, err = _run("correct_training.py", tmp_path, capsys)
    assert rc == 0 and findings == [], err
    assert "gradtrace" not in err


def test_readme_table_matches_codes():
    rows = [line.split("|") for line in (EXAMPLES / "README.md").read_text().splitlines()
            if line.startswith("| ") and line.count("|") == 4 and ".py" in line]
    table = {cells[1].strip(): cells[3].strip() for cells in rows}
    assert set(table) == set(EXPECT)
    for name, (kind, code, _) in EXPECT.items():
        assert table[name] == code_for(kind, code), name
