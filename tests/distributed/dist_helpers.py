"""Plain helpers for the distributed tests (importable as `dist_helpers`)."""
from __future__ import annotations

import itertools
import os
import random
import socket
from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"


def _port_block() -> range:
    """This test process's own ports: below the kernel's ephemeral range (never handed out for
    a connection or a bind to port 0, so no gloo socket of the other xdist worker can take one
    between our check and rank 0's bind), a block of 1000 per xdist worker (gw0, gw1, ...)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            low = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default; macOS's range starts at 49152
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    index = int(worker) if worker.isdigit() else 0
    start = max(1024, low - 16_000) + 1000 * (index % 16)
    return range(start, start + 1000)


_BLOCK = _port_block()
_NEXT = itertools.count(random.randrange(len(_BLOCK)))  # another run on the machine: elsewhere


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now that no other process of this test run will pick: the
    next one of this process's block (:func:`_port_block`) that binds. The old form (bind to 0,
    close, return) let the other xdist worker's gloo connections take the port before rank 0's
    store bound it."""
    for _ in range(len(_BLOCK)):
        port = _BLOCK[next(_NEXT) % len(_BLOCK)]
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: a port in TIME_WAIT is skipped
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # the whole block busy
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def marked(script: str, marker: str) -> int:
    """1-based line of the line carrying ``# <- marker`` in a bundled script."""
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if f"# <- {marker}" in line)


SILENT_BUGS = "spawn_silent_bugs.py"


def silent_bugs_expected() -> list[tuple[str, int]]:
    """The (code, line) list each test of a spawn_silent_bugs.py part asserts over the whole run:
    every part's findings and nothing else, in the report's order (each part's GT887 before the
    static twin GT453 attached to it, as when each part was a script of its own)."""
    def at(marker: str) -> int:
        return marked(SILENT_BUGS, marker)

    return [("GT888", at("registered")), ("GT887", at("bypass")), ("GT887", at("method_bypass")),
            ("GT453", at("bypass")), ("GT453", at("method_bypass"))]
