"""Command line: gradtrace check | rules | explain | run.  (placeholder; being written)"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        from gradtrace.runtime.runner import main as run_main

        return run_main(argv[1:])
    return 0
