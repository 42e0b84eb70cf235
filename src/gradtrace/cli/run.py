"""`gradtrace run`: a script under gradient tracing; the runtime parses its own options."""
from __future__ import annotations

import argparse
from typing import Any, Sequence


def add_parser(sub: Any) -> None:
    sub.add_parser("run", help="run a script under gradient tracing (see `gradtrace run --help`)",
                   add_help=False)


def main(args: Sequence[str]) -> int:
    """Run with the arguments after ``run`` (the runtime's own argparse reads them)."""
    from gradtrace.runtime.runner import main as run_main

    return run_main(list(args))


def run(ns: argparse.Namespace) -> int:  # pragma: no cover - main() dispatches `run` first
    return main([])
