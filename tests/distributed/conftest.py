"""Run a script under `torchrun --nproc-per-node=2 -m gradtrace run` (gloo, loopback)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dist_helpers import SCRIPTS, free_port


class TorchrunResult:
    """Exit code, combined output and the findings JSON of one torchrun launch."""

    def __init__(self, code: int, out: str, doc: dict[str, Any]) -> None:
        self.code, self.out, self.doc = code, out, doc
        self.findings: list[dict[str, Any]] = doc.get("findings", [])

    def codes(self) -> list[str]:
        return [f["code"] for f in self.findings]

    def only(self, code: str) -> list[dict[str, Any]]:
        return [f for f in self.findings if f["code"] == code]


@pytest.fixture
def torchrun(tmp_path: Path):
    """``torchrun(script, *gradtrace_args, timeout=..)`` -> :class:`TorchrunResult`."""

    def run(script: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None,
            launch_only: bool = False) -> TorchrunResult:
        out_json = tmp_path / "findings.json"
        out_json.unlink(missing_ok=True)
        ours = [] if launch_only else ["-m", "gradtrace", "run", "--json-out", str(out_json)]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
               "--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={free_port()}",
               "--monitor-interval=0.1", *ours, *args, str(SCRIPTS / script)]
        full = {**os.environ, "OMP_NUM_THREADS": "1", "GRADTRACE_DDP_DIR": str(tmp_path),
                "GRADTRACE_GATHER_TIMEOUT": "20", **(env or {})}
        full.pop("TORCH_DISTRIBUTED_DEBUG", None)
        proc = subprocess.run(cmd, cwd=SCRIPTS, env=full, capture_output=True, text=True,
                              timeout=timeout)
        doc = json.loads(out_json.read_text()) if out_json.exists() else {}
        return TorchrunResult(proc.returncode, proc.stdout + proc.stderr, doc)

    return run


@pytest.fixture
def spawnrun(tmp_path: Path):
    """``spawnrun(script)``: ``python -m gradtrace run`` on a script that starts its ranks
    with torch.multiprocessing.spawn (MASTER_ADDR/MASTER_PORT in the environment)."""

    def run(script: str, *args: str, timeout: float = 120) -> TorchrunResult:
        out_json = tmp_path / "findings.json"
        out_json.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "gradtrace", "run", "--json-out", str(out_json), *args,
               str(SCRIPTS / script)]
        full = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(free_port())}
        full.pop("TORCH_DISTRIBUTED_DEBUG", None)
        proc = subprocess.run(cmd, cwd=SCRIPTS, env=full, capture_output=True, text=True,
                              timeout=timeout)
        doc = json.loads(out_json.read_text()) if out_json.exists() else {}
        return TorchrunResult(proc.returncode, proc.stdout + proc.stderr, doc)

    return run
