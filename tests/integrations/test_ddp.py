"""The callbacks under real DDP: 2 CPU processes on gloo (slow: one run per trainer)."""
from __future__ import annotations

import json
import os
from importlib.util import find_spec
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")

SCRIPTS = Path(__file__).parent / "scripts"
# find_spec, not an import: lightning is imported by the scripts these tests run, and an import
# here would cost every xdist worker ~4 s of CPU at collection
pytestmark = [pytest.mark.ddp, pytest.mark.skipif(find_spec("lightning") is None,
                                                  reason="lightning is not installed")]


def _marked(script: str, marker: str) -> int:
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, s in enumerate(lines, 1) if f"# <- {marker}" in s)


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
            "GRADTRACE_DDP_DIR": "", "OMP_NUM_THREADS": "1"}


class _Ran:
    def __init__(self, codes: list[int], out: str) -> None:
        self.returncode, self.stderr = max(codes, key=abs), out


def _ranks(forked, tmp_path: Path, script: str, preload: list[str]) -> _Ran:
    """``python script tmp_path`` in two ranks with torchrun's environment, forked from the rank
    server (tests/conftest.py ``forked``: torch imported once) after ``preload`` was imported
    once for both, instead of a launcher and two fresh interpreters importing torch, torch._dynamo
    and the framework each (16.8 and 9.2 s of CPU for the two tests); the output of both ranks
    is the ``stderr`` read below."""
    out = tmp_path / "output.txt"
    env = {"PYTHONPATH": _env()["PYTHONPATH"], "GRADTRACE_DDP_DIR": ""}
    codes = forked({"argv": [str(SCRIPTS / script), str(tmp_path)], "cwd": str(tmp_path),
                    "env": env, "out": str(out), "world": 2, "timeout": 600, "script": True,
                    "preload": preload})
    return _Ran(codes, out.read_text() if out.exists() else "")


def test_lightning_ddp_names_unused_parameters_per_rank_and_rank0_reports(
        tmp_path: Path, forked) -> None:
    res = _ranks(forked, tmp_path, "lightning_ddp.py",
                 ["lightning.pytorch", "gradtrace.integrations.lightning"])
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["error"] for r in ranks), res.stderr[-3000:]  # DDP raised on both ranks
    line = _marked("lightning_ddp.py", "unused")
    zero = [(f["code"], Path(f["path"]).name, f["line"]) for f in ranks[0]["findings"]]
    assert zero == [("GT880", "lightning_ddp.py", line)], ranks[0]["findings"]
    msg = ranks[0]["findings"][0]["message"]
    assert "aux.weight, aux.bias" in msg and "ranks 0, 1" in msg and "never ran" in msg
    assert [f["code"] for f in ranks[1]["findings"]] == ["GT880"]  # rank 1's own view
    assert "on rank 1" in ranks[1]["findings"][0]["message"]
    report = (tmp_path / "report.html").read_text()  # one report, by rank 0
    assert "aux.weight, aux.bias" in report and "ranks 0, 1" in report
    assert res.stderr.count("GT880") == 1  # printed once, by rank 0
    for r in ranks:  # the first optimizer step was logged on each rank
        assert [s for s, _ in r["logged"]] == [0]


def test_hf_trainer_under_torchrun_merges_every_rank_on_rank0(tmp_path: Path, forked) -> None:
    """Two ranks with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR...), forked from
    the rank server; the real launcher's face is tests/distributed/test_torchrun.py's."""
    if find_spec("transformers") is None or find_spec("accelerate") is None:
        pytest.skip("transformers or accelerate is not installed")
    res = _ranks(forked, tmp_path, "hf_ddp.py",
                 ["transformers.trainer", "transformers.models.bert.modeling_bert",
                  "gradtrace.integrations.transformers"])
    assert res.returncode == 0, res.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    line = _marked("hf_ddp.py", "unused")
    zero = ranks[0]["findings"]
    assert [(f["code"], Path(f["path"]).name, f["line"]) for f in zero] == [
        ("GT820", "hf_ddp.py", line)]
    assert zero[0]["message"].startswith("[all 2 ranks] extra.weight, extra.bias never")
    assert [f["message"][:30] for f in ranks[1]["findings"]] == ["extra.weight, extra.bias never"]
    assert "[all 2 ranks] extra.weight" in (tmp_path / "gradtrace.html").read_text()
    assert res.stderr.count("GT820") == 1  # printed once, by rank 0
    norms = [[m["gradtrace/grad_norm_total"] for _, m in r["logged"]] for r in ranks]
    assert len(norms[0]) == 3 and norms[0] == pytest.approx(norms[1], rel=1e-6)  # all-reduced
    assert len(set(norms[0])) == 3 and 1.0 not in norms[0]  # not clipped
