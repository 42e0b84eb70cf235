"""`gradtrace demo`: check and run a small broken training script."""
from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    sub.add_parser("demo", help="check and run a small broken training script")


def run(ns: argparse.Namespace) -> int:
    from gradtrace.demo import run_demo

    return run_demo()
