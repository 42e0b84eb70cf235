"""Tiny inline-SVG charts for the HTML report (no JavaScript, no external files).

Each function returns one ``<svg>`` element as a string. Values are drawn on a log10 scale;
``None`` (no gradient) is drawn grey and non-finite values red, so missing and broken flow
stand out at a glance.
"""
from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # annotations only: the Report calls its renderers
    from gradtrace.report.model import StepRecord, Track

GREY = "#c8c8c8"
RED = "#d62728"
ZERO = "#ffffff"  # an exact zero (no update at all) is no colour of the scale
_STOPS = [(0.0, (68, 1, 84)), (0.25, (59, 82, 139)), (0.5, (33, 145, 140)),
          (0.75, (94, 201, 98)), (1.0, (253, 231, 37))]  # viridis
_FONT = 'font-family="sans-serif" font-size="11"'


def color(t: float) -> str:
    """Viridis colour for ``t`` in [0, 1]."""
    t = min(1.0, max(0.0, t))
    for (a, ca), (b, cb) in zip(_STOPS, _STOPS[1:]):
        if t <= b:
            f = (t - a) / (b - a)
            rgb = [round(x + (y - x) * f) for x, y in zip(ca, cb)]
            return "#%02x%02x%02x" % tuple(rgb)
    return "#fde725"


def _log(x: float | None) -> float | None:
    if x is None or not math.isfinite(x) or x <= 0:
        return None
    return math.log10(x)


def _range(vals: Sequence[float | None]) -> tuple[float, float]:
    logs = [v for v in (_log(x) for x in vals) if v is not None]
    if not logs:
        return -1.0, 1.0
    lo, hi = math.floor(min(logs)), math.ceil(max(logs))
    return (lo, hi) if hi > lo else (lo - 1, hi + 1)


def _exp(v: float) -> str:
    """``1e-3`` for an integer exponent, ``1e-2.5`` otherwise."""
    return f"1e{v:.0f}" if abs(v - round(v)) < 1e-9 else f"1e{v:.1f}"


def _text(x: float, y: float, s: str, anchor: str = "start", extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" {_FONT} text-anchor="{anchor}" {extra}>'
            f"{escape(s)}</text>")


def flow_bars(track: Track, width: int = 860, step: StepRecord | None = None) -> str:
    """Gradient flow per parameter at one recorded step (default: the last): mean |g| and
    max |g| bars."""
    last = step if step is not None else track.steps[-1]
    params = track.params
    n = len(params)
    mean = [None if g is None else g / math.sqrt(max(p.numel, 1))
            for p, g in zip(params, last.norm)]
    vals = list(mean) + list(last.max_abs)
    lo, hi = _range(vals)
    longest = max((len(p.name[-28:]) for p in params), default=4)
    left, top, h, bottom = 60, 20, 220, 16 + int(5.5 * longest)
    bw = max(4.0, min(28.0, (width - left - 20) / max(n, 1)))
    width = max(560, int(left + bw * n + 20))
    y = lambda v: top + h - (v - lo) / (hi - lo) * h  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{top + h + bottom}" class="chart flow">']
    for k in range(int(lo), int(hi) + 1):
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(k):.1f}" y2="{y(k):.1f}" '
                     'stroke="#eee"/>')
        parts.append(_text(left - 4, y(k) + 4, f"1e{k}", "end"))
    for i, p in enumerate(params):
        x = left + i * bw
        mx, mn, nf = _log(last.max_abs[i]), _log(mean[i]), last.nonfinite[i]
        if last.norm[i] is None:  # a stub on the axis: a full bar would read as a big value
            parts.append(f'<rect x="{x + 1:.1f}" y="{top + h - 6}" width="{bw - 2:.1f}" '
                         f'height="6" fill="{GREY}"><title>{escape(p.name)}: no gradient'
                         '</title></rect>')
        elif nf:
            parts.append(f'<rect x="{x + 1:.1f}" y="{top}" width="{bw - 2:.1f}" height="{h}" '
                         f'fill="{RED}"><title>{escape(p.name)}: {nf} NaN/Inf</title></rect>')
        else:
            for v, c, name in ((mx, "#1f77b4", "max |g|"), (mn, "#ff7f0e", "mean |g|")):
                if v is not None:
                    parts.append(f'<rect x="{x + 1:.1f}" y="{y(v):.1f}" width="{bw - 2:.1f}" '
                                 f'height="{top + h - y(v):.1f}" fill="{c}" opacity="0.85">'
                                 f'<title>{escape(p.name)} {name} = {10 ** v:.3g}</title></rect>')
        parts.append(_text(x + bw / 2, top + h + 8, p.name[-28:], "end",
                           f'transform="rotate(-60 {x + bw / 2:.1f} {top + h + 8})"'))
    parts.append(_text(left, 12, "max |g| (blue), mean |g| (orange); grey stub = no gradient, "
                       "red = NaN/Inf; step " + str(last.step)))
    parts.append("</svg>")
    return "".join(parts)


def heat_map(track: Track, width: int = 860, ratios: bool = False) -> str:
    """Modules (rows) x recorded steps (columns), colour = log10 grad norm (or update ratio)."""
    modules = track.modules()
    cols = []
    for s in track.steps:
        cols.append(track.module_update_ratios(s) if ratios else track.module_norms(s))
    bad = [{track.params[i].module for i, nf in enumerate(s.nonfinite) if nf} for s in track.steps]
    vals = [c.get(m) for c in cols for m in modules]
    lo, hi = _range(vals)
    left, top, row = 150, 22, max(6, min(18, 400 // max(len(modules), 1)))
    cw = max(1.0, (width - left - 70) / max(len(cols), 1))
    height = max(top + row * len(modules), top + 5 * 16) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'class="chart heat">']
    for r, m in enumerate(modules):
        yy = top + r * row
        if row >= 9:
            parts.append(_text(left - 4, yy + row - 3, (m or "<model>")[-24:], "end"))
        for c, col in enumerate(cols):
            v = col.get(m)
            lv = _log(v)
            if m in bad[c]:
                fill = RED
            elif lv is None:
                fill = ZERO if v == 0 else GREY
            else:
                fill = color((lv - lo) / (hi - lo))
            label = "no data" if v is None else f"{v:.3g}"
            parts.append(f'<rect x="{left + c * cw:.2f}" y="{yy}" width="{cw + 0.3:.2f}" '
                         f'height="{row}" fill="{fill}"><title>{escape(m or "<model>")} step '
                         f'{track.steps[c].step}: {label}</title></rect>')
    for k in range(5):  # colour bar
        parts.append(f'<rect x="{width - 60}" y="{top + k * 16}" width="12" height="16" '
                     f'fill="{color(1 - k / 4)}"/>')
        parts.append(_text(width - 44, top + k * 16 + 12, _exp(hi - (hi - lo) * k / 4)))
    first, last = track.steps[0].step, track.steps[-1].step
    parts.append(_text(left, height - 8, f"step {first}"))
    parts.append(_text(left + cw * len(cols), height - 8, f"step {last}", "end"))
    what = "update / weight ratio" if ratios else "gradient norm"
    parts.append(_text(left, 14, f"{what} per module (log colour); white = exactly 0, "
                       "grey = none, red = NaN/Inf"))
    parts.append("</svg>")
    return "".join(parts)


def line_chart(xs: Sequence[int], ys: Sequence[float | None], title: str,
               width: int = 860, log: bool = False) -> str:
    """A simple polyline chart (gaps where a value is missing)."""
    pts = [(x, _log(y) if log else y) for x, y in zip(xs, ys)]
    pts = [(x, y) for x, y in pts if y is not None and math.isfinite(y)]
    left, top, h = 60, 22, 150
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + h + 30}" '
             f'class="chart line">', _text(left, 14, title)]
    if len(pts) >= 1:
        x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
        y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
        if y1 == y0:
            y0, y1 = y0 - 1, y1 + 1
        if x1 == x0:
            x1 = x0 + 1
        fx = lambda x: left + (x - x0) / (x1 - x0) * (width - left - 20)  # noqa: E731
        fy = lambda y: top + h - (y - y0) / (y1 - y0) * h  # noqa: E731
        path = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#1f77b4" '
                     'stroke-width="1.5"/>')
        for y in (y0, y1):
            lab = f"1e{y:.1f}" if log else f"{y:.3g}"
            parts.append(_text(left - 4, fy(y) + 4, lab, "end"))
        parts.append(_text(left, top + h + 18, f"step {x0}"))
        parts.append(_text(width - 20, top + h + 18, f"step {x1}", "end"))
    parts.append(f'<rect x="{left}" y="{top}" width="{width - left - 20}" height="{h}" '
                 'fill="none" stroke="#ccc"/></svg>')
    return "".join(parts)
