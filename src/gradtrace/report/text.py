"""Terminal summary of a watch report: rich tables when rich is installed, plain text else.

rich is imported lazily, only when a summary is rendered.
"""
from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Any

from gradtrace.report.numbers import fmt

if TYPE_CHECKING:  # annotations only: the Report calls its renderers
    from gradtrace.report.model import Report, Track


def module_rows(t: Track) -> list[tuple[str, str, str, str, str, str, str]]:
    """One row per module at the last recorded step: name, type, norm, max|g|, zeros,
    update ratio, status."""
    if not t.steps:
        return []
    last = t.steps[-1]
    norms = t.module_norms(last)
    ratios = t.module_update_ratios(last)
    rows = []
    for m in t.modules():
        idx = [i for i, p in enumerate(t.params) if p.module == m]
        mtype = t.params[idx[0]].module_type
        mx = [last.max_abs[i] for i in idx if last.max_abs[i] is not None]
        zf = [(last.zero_frac[i], t.params[i].numel) for i in idx if last.zero_frac[i] is not None]
        zeros = sum(z * n for z, n in zf) / sum(n for _, n in zf) if zf else None
        status = _status(t, idx)
        rows.append((m or "<model>", mtype, fmt(norms.get(m)), fmt(max(mx) if mx else None),
                     "-" if zeros is None else f"{zeros:.0%}", fmt(ratios.get(m)), status))
    return rows


def _status(t: Track, idx: list[int]) -> str:
    ps, ss = [t.params[i] for i in idx], [t.summaries[i] for i in idx]
    if any(s.nonfinite_steps for s in ss):
        return "NaN/Inf"
    if not any(p.requires_grad for p in ps):
        return "frozen"
    if all(s.graded_steps == 0 for p, s in zip(ps, ss) if p.requires_grad):
        return "NO GRADIENT"
    if any(p.in_optimizer is False and p.requires_grad for p in ps):
        return "not in optimizer"
    return "ok"


_HEAD = ("module", "type", "grad norm", "max |g|", "zeros", "update/w", "status")


def _plain(report: Report) -> str:
    out = []
    for t in report.tracks:
        out.append(f"== {t.name}: {t.total_steps} steps (every {t.every})")
        rows = [_HEAD, *module_rows(t)]
        widths = [max(len(r[k]) for r in rows) for k in range(len(_HEAD))]
        for r in rows:
            out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    out.append(f"{len(report.findings)} finding(s)")
    for f in report.findings:
        out.append(f"{f.path}:{f.line}: {f.code} [{f.severity}] {f.message}")
    return "\n".join(out) + "\n"


def rich_renderable(report: Report) -> Any:
    """A rich renderable (Group of tables and findings)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    items: list[Any] = []
    colours = {"ok": "green", "frozen": "dim", "NO GRADIENT": "bold red",
               "NaN/Inf": "bold red", "not in optimizer": "bold yellow"}
    for t in report.tracks:
        table = Table(title=f"{t.name}: {t.total_steps} steps (every {t.every})",
                      title_justify="left")
        for k, h in enumerate(_HEAD):
            table.add_column(h, justify="left" if k < 2 else "right")
        for r in module_rows(t):
            table.add_row(*r[:-1], Text(r[-1], style=colours.get(r[-1], "")))
        items.append(table)
    sev = {"error": "bold red", "warning": "yellow", "info": "cyan"}
    items.append(Text(f"{len(report.findings)} finding(s)", style="bold"))
    for f in report.findings:
        line = Text()
        line.append(f"{f.path}:{f.line}: ", style="dim")
        line.append(f"{f.code} ", style=sev.get(f.severity, ""))
        line.append(f.message)
        items.append(line)
    return Group(*items)


def render_summary(report: Report, width: int | None = None) -> str:
    """The summary as a string (rich formatting without colour codes when rich exists)."""
    try:
        from rich.console import Console
    except ImportError:
        return _plain(report)
    buf = io.StringIO()
    console = Console(file=buf, width=width or 110, color_system=None, force_terminal=False)
    console.print(rich_renderable(report))
    return buf.getvalue()


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
