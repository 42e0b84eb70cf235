"""Render findings as plain text, ruff style (no rich needed).

::

    train.py:12:1: GT101 the tensor passed to backward() has no grad_fn ...
       12 | out = model(x).detach()
      --> train.py:14: backward() failed here
      help: remove .detach() on the path to the loss
"""
from __future__ import annotations

import linecache
import sys
from typing import Iterable

from gradtrace.findings import Finding


def render_finding(f: Finding, *, source: bool = True) -> str:
    """One finding as text: header, the source line, related places, help."""
    cell = cell_label(f.path)
    where = f"{cell}, line {f.line}" if cell else f"{f.path}:{f.line}:{f.column + 1}"
    lines = [f"{where}: {f.code} {f.message}"]
    if source:
        text = linecache.getline(f.path, f.line).rstrip()
        if text.strip():
            lines.append(f"  {f.line:>4} | {text.strip()}")
    for r in f.related:
        cell = cell_label(r.path)
        lines.append(f"  --> {f'{cell}, line {r.line}' if cell else f'{r.path}:{r.line}'}: "
                     f"{r.message}")
    if f.fix is not None and f.fix.title:
        lines.append(f"  help: {f.fix.title}")
    return "\n".join(lines)


def cell_label(path: str) -> str:
    """IPython's own name for a cell's code (``Cell In[4]``), or '' outside IPython."""
    ipython = sys.modules.get("IPython")
    if ipython is None or not path.startswith("<") and "ipykernel" not in path:
        return ""
    try:
        shell = ipython.get_ipython()
        name = shell.compile.format_code_name(path) if shell is not None else None
    except Exception:  # an old or unusual IPython: plain paths
        return ""
    return " ".join(name) if name else ""


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
