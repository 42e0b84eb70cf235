"""Plain helpers for the runtime tests (importable as `rt_helpers`)."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path


def marked_line(src: str, marker: str = "# <- cause") -> int:
    """1-based number of the line carrying ``marker``."""
    lines = textwrap.dedent(src).lstrip("\n").splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


def raise_plain(src: str, tmp_path: Path) -> BaseException:
    """Run ``src`` without gradtrace and return the exception it raises."""
    path = tmp_path / "plain.py"
    path.write_text(src, encoding="utf-8")
    try:
        runpy.run_path(str(path), run_name="__main__")
    except BaseException as e:  # noqa: BLE001 - we want whatever the repro raises
        return e
    raise AssertionError("the repro did not raise")
