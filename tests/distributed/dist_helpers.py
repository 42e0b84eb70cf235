"""Plain helpers for the distributed tests (importable as `dist_helpers`)."""
from __future__ import annotations

import socket
from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def marked(script: str, marker: str) -> int:
    """1-based line of the line carrying ``# <- marker`` in a bundled script."""
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if f"# <- {marker}" in line)
