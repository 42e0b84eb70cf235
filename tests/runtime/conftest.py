"""Helpers for runtime tests: run a script in-process under `gradtrace run` and read the JSON."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest


class RunResult:
    """Exit code, stderr text and findings (dicts, JSON schema) of one in-process run."""

    def __init__(self, code: int, err: str, doc: dict[str, Any]) -> None:
        self.code, self.err, self.doc = code, err, doc
        self.findings = doc.get("findings", [])

    def codes(self) -> list[str]:
        return [f["code"] for f in self.findings]


@pytest.fixture
def run_script(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Write ``src`` to a file and run it with ``gradtrace.runtime.runner.main``."""
    from gradtrace.runtime.runner import main

    monkeypatch.chdir(tmp_path)

    def run(src: str, name: str = "prog.py", extra: list[str] | None = None) -> RunResult:
        path = tmp_path / name
        path.write_text(textwrap.dedent(src).lstrip("\n"), encoding="utf-8")
        out = tmp_path / (name + ".json")
        code = main(["--json-out", str(out), *(extra or []), name])
        err = capsys.readouterr().err
        doc = json.loads(out.read_text()) if out.exists() else {}
        return RunResult(code, err, doc)

    return run


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    """Example scripts may leave grad mode off (that is the bug they show); undo it.

    Also run single-threaded: tiny models are much faster so on a shared CI box."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_grad_enabled(True)
    torch.set_num_threads(threads)
