"""The report's charts as one PNG (matplotlib, imported lazily; optional extra ``report``)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradtrace.errors import GradtraceError

if TYPE_CHECKING:  # annotations only: the Report calls its renderers
    from gradtrace.report.model import Report, Track


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise GradtraceError("save_png needs matplotlib: pip install 'gradtrace[report]' "
                             "(or use save_html, which needs nothing)") from exc
    return plt


def _log(x: float | None) -> float:
    return math.log10(x) if x is not None and math.isfinite(x) and x > 0 else math.nan


def _flow(ax: Any, t: Track) -> None:
    last = t.steps[-1]
    names = [p.name for p in t.params]
    xs = range(len(names))
    mean = [None if g is None else g / math.sqrt(max(p.numel, 1))
            for p, g in zip(t.params, last.norm)]
    ax.bar(xs, [_log(v) for v in last.max_abs], color="#1f77b4", alpha=0.8, label="max |g|")
    ax.bar(xs, [_log(v) for v in mean], color="#ff7f0e", alpha=0.8, label="mean |g|")
    for i, g in enumerate(last.norm):
        if g is None:
            ax.axvspan(i - 0.4, i + 0.4, color="#c8c8c8", alpha=0.5)
        elif last.nonfinite[i]:
            ax.axvspan(i - 0.4, i + 0.4, color="#d62728", alpha=0.6)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=70, ha="right", fontsize=6)
    ax.set_ylabel("log10 |grad|")
    ax.set_title(f"{t.name}: gradient flow at step {last.step} (grey: none, red: NaN/Inf)")
    ax.legend(fontsize=7)


def _heat(ax: Any, t: Track) -> None:
    modules = t.modules()
    grid = [[_log(t.module_norms(s).get(m)) for s in t.steps] for m in modules]
    im = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="viridis")
    ax.set_yticks(range(len(modules)))
    ax.set_yticklabels([m or "<model>" for m in modules], fontsize=6)
    ax.set_xlabel(f"recorded step (every {t.every * t.stride})")
    ax.set_title("log10 gradient norm per module")
    ax.figure.colorbar(im, ax=ax)


def save_png(report: Report, path: Path) -> Path:
    """Draw gradient flow, the norm heat map and the loss of every track into ``path``."""
    plt = _pyplot()
    tracks = [t for t in report.tracks if t.steps]
    rows = max(1, len(tracks))
    fig, axes = plt.subplots(rows, 3, figsize=(18, 4.5 * rows), squeeze=False)
    for r, t in enumerate(tracks):
        _flow(axes[r][0], t)
        _heat(axes[r][1], t)
        losses = [(s.step, s.loss) for s in t.steps if s.loss is not None]
        ax = axes[r][2]
        if losses:
            ax.plot([a for a, _ in losses], [b for _, b in losses])
        ax.set_title("loss" if losses else "loss (not seen)")
    if not tracks:
        axes[0][0].set_title("no step recorded")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
