"""`gradtrace rules [--markdown]`: every code of the catalogue (docs/rules.md with --markdown)."""
from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    r = sub.add_parser("rules", help="list the rules")
    r.add_argument("--markdown", action="store_true", help="write the rules reference (docs/rules.md)")


def run(ns: argparse.Namespace) -> int:
    from gradtrace.docs import rules_markdown, rules_table

    sys.stdout.write(rules_markdown() if ns.markdown else rules_table())
    return 0
