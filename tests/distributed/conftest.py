"""Run a script under `torchrun --nproc-per-node=2 -m gradtrace run` (gloo, loopback), or
under two ranks forked from a process that imported torch once (`fork_ranks.py`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
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
def forkrun(tmp_path: Path, forked):
    """``forkrun(script, *gradtrace_args, world=2, env=..)`` -> :class:`TorchrunResult`:
    ``gradtrace run`` in ``world`` ranks with torchrun's environment (world=1: a plain
    ``gradtrace run``, as for scripts that spawn their own ranks), forked from the server."""

    def run(script: str, *args: str, world: int = 2, timeout: float = 120,
            env: dict[str, str] | None = None) -> TorchrunResult:
        out_json = tmp_path / "findings.json"
        out_json.unlink(missing_ok=True)
        out_txt = tmp_path / "output.txt"
        out_txt.unlink(missing_ok=True)
        extra = {"GRADTRACE_DDP_DIR": str(tmp_path), "GRADTRACE_GATHER_TIMEOUT": "20",
                 **(env or {})}
        if world == 1:
            extra.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        req = {"argv": ["run", "--json-out", str(out_json), *args, str(SCRIPTS / script)],
               "cwd": str(SCRIPTS), "env": extra, "out": str(out_txt), "world": world,
               "port": free_port(), "run_id": uuid.uuid4().hex, "timeout": timeout}
        codes = forked(req)
        doc = json.loads(out_json.read_text()) if out_json.exists() else {}
        out = out_txt.read_text() if out_txt.exists() else ""
        return TorchrunResult(max(codes, key=abs), out, doc)

    return run


_ONCE: dict[str, TorchrunResult] = {}


@pytest.fixture
def forkrun_once(forkrun):
    """``forkrun_once(script)`` -> ``forkrun(script, world=1)``, run once per test process and
    kept: for a script of several parts, each read by its own test (spawn_silent.py: one
    ``mp.spawn`` of two fresh interpreters instead of four). Through ``forkrun``, these tests
    are in its xdist group, so under ``-n 2`` the script runs once. Its time limit is the sum of
    the former scripts' (``parts`` x 120 s): the machine's load stretches each part."""

    def run(script: str, parts: int) -> TorchrunResult:
        if script not in _ONCE:  # a failed run is kept too: each test reads its code and output
            _ONCE[script] = forkrun(script, world=1, timeout=120 * parts)
        return _ONCE[script]

    return run
