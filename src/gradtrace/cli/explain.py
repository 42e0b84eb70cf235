"""`gradtrace explain CODE_OR_MESSAGE`: one code of the catalogue in full, or a PyTorch error."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from gradtrace.cli._common import error


def add_parser(sub: Any) -> None:
    e = sub.add_parser("explain", help="explain a rule code, or an error message from PyTorch")
    e.add_argument("what", nargs="+", metavar="CODE_OR_MESSAGE")


def run(ns: argparse.Namespace) -> int:
    from gradtrace.codes import lookup
    from gradtrace.docs import explain_code

    what = " ".join(ns.what)
    entry = lookup(what)
    if entry is not None:
        sys.stdout.write(explain_code(entry))
        return 0
    message = _explain_message(what)
    if message is not None:
        sys.stdout.write(message)
        return 0
    if len(what) < 12 and what.strip().upper().startswith("GT"):
        error(f"unknown rule {what!r}; `gradtrace rules` lists them")
    else:
        error(f"no rule and no known PyTorch error matches {what!r}; "
              "`gradtrace rules` lists the rules")
    return 2


def _explain_message(text: str) -> str | None:
    """A PyTorch error message, explained by the error catalogue (torch-free): an exact
    match first, then a DistributedDataParallel/collective error (GT880-GT888), then a
    match by the message's words."""
    from gradtrace.runtime.catalogue import explain_message
    from gradtrace.runtime.distributed.ranks import explain_message as explain_distributed

    findings = (explain_message(text, partial=False) or explain_distributed(text)
                or explain_message(text))
    if not findings:
        return None
    parts = []
    for f in findings:
        parts.append(f"{f.code} {f.name}\n\n{f.message}\n")
        if f.fix is not None:
            parts.append(f"Fix: {f.fix.title}\n")
    return "\n".join(parts)
