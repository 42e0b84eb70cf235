"""Shared helpers: run the real `gradtrace` command in a subprocess."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "gradtrace"


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile gradtrace once, in the controlling process: the suite starts about 200
    Python processes, and where PYTHONDONTWRITEBYTECODE is set (CI machines) each of them
    would compile every module it imports again (half a second for the rules alone)."""
    if not hasattr(config, "workerinput") and SRC.is_dir():
        import compileall

        compileall.compile_dir(str(SRC), quiet=2)


class CLI:
    """Runs `python -m gradtrace ...` in a folder and returns the CompletedProcess."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, input: bytes | None = None, env: dict | None = None
                 ) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gradtrace", *args], cwd=self.cwd,
                              input=input, capture_output=True, env=env, timeout=120)

    def write(self, name: str, text: str) -> Path:
        p = self.cwd / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return p


@pytest.fixture
def cli(tmp_path: Path) -> CLI:
    return CLI(tmp_path)


@pytest.fixture(autouse=True)
def _own_check_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own check cache folder (created only if used), never the repo's."""
    name = str(abs(hash(request.node.nodeid)))
    folder = tmp_path_factory.getbasetemp() / "gradtrace_cache" / name
    monkeypatch.setenv("GRADTRACE_CACHE_DIR", str(folder))
