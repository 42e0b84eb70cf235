"""The callbacks under real DDP: 2 CPU processes on gloo (slow: one run per trainer)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
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


def test_lightning_ddp_names_unused_parameters_per_rank_and_rank0_reports(
        tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(SCRIPTS / "lightning_ddp.py"), str(tmp_path)],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
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


def test_hf_trainer_under_torchrun_merges_every_rank_on_rank0(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
           f"--master-port={port}", str(SCRIPTS / "hf_ddp.py"), str(tmp_path)]
    res = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                         timeout=600)
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
