"""One self-contained HTML file for a watch report: inline CSS and inline SVG charts.

No scripts, no external resources: the file can be mailed, attached to CI artifacts or
opened offline. The charts come from :mod:`gradtrace.report.svg`.
"""
from __future__ import annotations

import math
import re
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from gradtrace.findings import Finding
from gradtrace.report import svg
from gradtrace.report.numbers import fmt

if TYPE_CHECKING:  # annotations only: the Report calls its renderers
    from gradtrace.report.model import Report, Track

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:14px;margin:18px 0 6px} .meta{color:#666;font-size:12px}
.finding{border-left:4px solid #999;padding:6px 10px;margin:6px 0;background:#fafafa}
.error{border-color:#d62728} .warning{border-color:#ff9f1c} .info{border-color:#1f77b4}
.code{font-weight:bold;font-family:monospace} .loc{font-family:monospace;color:#555;font-size:12px}
table{border-collapse:collapse;font-size:12px} td,th{padding:2px 8px;border-bottom:1px solid #eee;
text-align:right} td:first-child,th:first-child{text-align:left;font-family:monospace}
.none{color:#999} .bad{color:#d62728;font-weight:bold} .ok{color:#2a9d8f}
.chart{display:block;margin:4px 0 12px;max-width:100%;height:auto}
"""


def _text(message: str) -> str:
    """Escaped text with its `code` spans set as code (messages are written with backticks)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(message))


def _finding_html(f: Finding) -> str:
    rel = "".join(f'<div class="loc">{escape(r.path)}:{r.line}: {_text(r.message)}</div>'
                  for r in f.related)
    return (f'<div class="finding {escape(f.severity)}"><span class="code">{escape(f.code)}'
            f'</span> <b>{escape(f.name)}</b> <span class="loc">{escape(f.path)}:{f.line}'
            f'</span><div>{_text(f.message)}</div>{rel}</div>')


def _cell(x: float | None, bad: bool = False) -> str:
    if x is None:
        return '<td class="none">-</td>'
    cls = ' class="bad"' if bad or not math.isfinite(x) else ""
    return f"<td{cls}>{escape(fmt(x))}</td>"


def _param_table(t: Track) -> str:
    last = t.steps[-1]
    rows = ["<table><tr><th>parameter</th><th>shape</th><th>grad norm</th><th>max |g|</th>"
            "<th>zeros</th><th>NaN/Inf</th><th>update/weight</th><th>graded steps</th>"
            "<th>status</th></tr>"]
    for i, (p, s) in enumerate(zip(t.params, t.summaries)):
        status = ("frozen" if not p.requires_grad else
                  f"NaN/Inf from step {s.first_nonfinite_step}" if s.nonfinite_steps else
                  "not in optimizer" if p.in_optimizer is False else
                  "NO GRADIENT" if s.graded_steps == 0 else "ok")
        scls = "bad" if status not in ("ok", "frozen") else (
            "none" if status == "frozen" else "ok")
        nf = last.nonfinite[i]
        rows.append(
            f"<tr><td>{escape(p.name)}</td><td>{'x'.join(map(str, p.shape)) or 'scalar'}</td>"
            + _cell(last.norm[i]) + _cell(last.max_abs[i]) + _cell(last.zero_frac[i])
            + (f'<td class="bad">{nf}</td>' if nf else _cell(None if nf is None else 0.0))
            + _cell(last.update_ratio(i)) + f"<td>{s.graded_steps}/{t.recorded_steps}</td>"
            f'<td class="{scls}">{status}</td></tr>')
    rows.append("</table>")
    return "".join(rows)


def _last_finite_flow(t: Track) -> list[str]:
    """When the last step is NaN, also show the flow just before it went bad."""
    if not any(t.steps[-1].nonfinite):
        return []
    ok = [s for s in t.steps if not any(s.nonfinite)]
    if not ok:
        return []
    return [f"<h3>Gradient flow at step {ok[-1].step} (last step without NaN/Inf)</h3>",
            svg.flow_bars(t, step=ok[-1])]


def _track_html(t: Track) -> str:
    if not t.steps:
        return f"<h2>{escape(t.name)}</h2><p>No step was recorded.</p>"
    trained = sum(1 for p in t.params if p.requires_grad)
    parts = [f"<h2>{escape(t.name)}</h2>",
             f'<div class="meta">{len(t.params)} parameters ({trained} trainable), '
             f"{t.total_steps} steps, every {t.every}, {len(t.steps)} kept in history "
             f"(stride {t.stride}); {'optimizer steps' if t.has_optimizer else 'backward passes'}"
             f"; watched at {escape(t.path)}:{t.line}</div>",
             "<h3>Gradient flow per layer (last step)</h3>", svg.flow_bars(t),
             *_last_finite_flow(t),
             "<h3>Gradient norm per module over steps</h3>", svg.heat_map(t)]
    if any(u is not None for s in t.steps for u in s.update_norm):
        parts += ["<h3>Update-to-weight ratio per module over steps</h3>",
                  svg.heat_map(t, ratios=True)]
    losses = [s.loss for s in t.steps]
    if any(v is not None for v in losses):
        parts += ["<h3>Loss</h3>", svg.line_chart([s.step for s in t.steps], losses, "loss")]
    parts += ["<h3>Parameters (last recorded step)</h3>", _param_table(t)]
    return "".join(parts)


def render_html(report: Report, standalone: bool = True) -> str:
    """The report as HTML text (a whole document when ``standalone``)."""
    n = len(report.findings)
    body = [f"<h1>gradtrace watch report</h1><div class=\"meta\">torch "
            f"{escape(str(report.meta.get('torch', '?')))}; {len(report.tracks)} model(s); "
            f"{n} finding(s)</div>", "<h2>Findings</h2>"]
    body += [_finding_html(f) for f in report.findings] or [
        '<p class="ok">No problem found in the gradient flow.</p>']
    body += [_track_html(t) for t in report.tracks]
    inner = "".join(body)
    if not standalone:
        return f'<div class="gradtrace-report"><style>{_CSS}</style>{inner}</div>'
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>gradtrace watch report</title>"
            f"<style>{_CSS}</style></head><body>{inner}</body></html>\n")


def write_html(report: Report, path: Path) -> Path:
    """Write :func:`render_html` to ``path`` (parents must exist) and return the path."""
    path.write_text(render_html(report), encoding="utf-8")
    return path
