"""Render findings as plain text, ruff style (no rich needed).

::

    train.py:12:1: GT101 the tensor passed to backward() has no grad_fn ...
       12 | out = model(x).detach()
      --> train.py:14: backward() failed here
      help: remove .detach() on the path to the loss
"""
from __future__ import annotations

import linecache
from typing import Iterable

from gradtrace.findings import Finding


def render_finding(f: Finding, *, source: bool = True) -> str:
    """One finding as text: header, the source line, related places, help."""
    lines = [f"{f.path}:{f.line}:{f.column + 1}: {f.code} {f.message}"]
    if source and not f.path.startswith("<"):
        text = linecache.getline(f.path, f.line).rstrip()
        if text.strip():
            lines.append(f"  {f.line:>4} | {text.strip()}")
    for r in f.related:
        lines.append(f"  --> {r.path}:{r.line}: {r.message}")
    if f.fix is not None and f.fix.title:
        lines.append(f"  help: {f.fix.title}")
    return "\n".join(lines)


def render_text(findings: Iterable[Finding], *, title: str = "", source: bool = True) -> str:
    """All findings, separated by blank lines, under an optional title line."""
    body = [render_finding(f, source=source) for f in findings]
    if not body:
        return ""
    head = [title] if title else []
    return "\n\n".join(["\n".join(head)] + body if head else body) + "\n"


def order(findings: Iterable[Finding]) -> list[Finding]:
    """Most likely root cause first (NOTE [ranking] in gradtrace.runtime.fuse): what the run
    saw before what only the code shows, errors before warnings; stable otherwise."""
    from gradtrace.runtime.fuse import rank_key

    return sorted(findings, key=rank_key)
