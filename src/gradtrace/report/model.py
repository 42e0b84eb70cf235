"""The watch report as a value object: what was recorded, separate from how it is drawn.

A :class:`Report` holds one :class:`Track` per watched (model, optimizer) pair and the
findings derived from them. It is torch-free and round-trips through JSON
(:meth:`Report.to_json` / :meth:`Report.from_json`); the renderers (text, HTML, PNG) are
separate modules that take a Report.

Non-finite floats are stored in JSON as the strings ``"nan"``, ``"inf"`` and ``"-inf"`` so
that the document stays valid JSON.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Sequence

from gradtrace.findings import Finding

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ParamInfo:
    """A watched parameter: qualified name, owning module, shape and training status."""

    name: str
    module: str
    module_type: str
    shape: tuple[int, ...]
    requires_grad: bool = True
    in_optimizer: bool | None = None
    path: str | None = None
    line: int | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.shape else 1


@dataclass(frozen=True)
class StepRecord:
    """Statistics of one recorded step; each tuple has one entry per parameter of the track.

    ``norm``/``max_abs``/``zero_frac``/``nonfinite`` are ``None`` where the gradient was None.
    ``update_norm`` is ``||w_after - w_before||`` of the step (None when unknown) and
    ``weight_norm`` is ``||w_before||``, the weight the update is measured against.
    """

    step: int
    loss: float | None
    norm: tuple[float | None, ...]
    max_abs: tuple[float | None, ...]
    zero_frac: tuple[float | None, ...]
    nonfinite: tuple[int | None, ...]
    update_norm: tuple[float | None, ...]
    weight_norm: tuple[float | None, ...]

    def update_ratio(self, i: int) -> float | None:
        """Update-to-weight ratio of parameter ``i`` at this step, or None when unknown."""
        u, w = self.update_norm[i], self.weight_norm[i]
        if u is None or w is None:
            return None
        if w == 0:
            return 0.0 if u == 0 else math.inf
        return u / w


@dataclass(frozen=True)
class ParamSummary:
    """Exact counters over every step of the run (the step history may be thinned)."""

    graded_steps: int = 0
    nonfinite_steps: int = 0
    first_nonfinite_step: int | None = None
    zero_grad_steps: int = 0
    updated_steps: int = 0
    zero_update_steps: int = 0
    units: int | None = None
    dead_units: int | None = None


@dataclass(frozen=True)
class NanSource:
    """Where non-finite values were first seen: step, module and how they were localized."""

    step: int
    module: str | None
    module_type: str | None
    kind: str
    detail: str
    path: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Track:
    """Everything recorded for one watched model (and optimizer)."""

    name: str
    params: tuple[ParamInfo, ...]
    summaries: tuple[ParamSummary, ...]
    steps: tuple[StepRecord, ...]
    total_steps: int
    every: int = 1
    stride: int = 1
    has_optimizer: bool = False
    nan_source: NanSource | None = None
    path: str = "<unknown>"
    line: int = 1
    recorded: int | None = None  # steps measured, when ``every`` changed on the way

    @property
    def recorded_steps(self) -> int:
        """How many steps were measured (every ``every``-th of ``total_steps``)."""
        if self.recorded is not None:
            return self.recorded
        return -(-self.total_steps // self.every)

    def modules(self) -> list[str]:
        """Module names in parameter (registration, i.e. roughly forward) order, no repeats."""
        seen: dict[str, None] = {}
        for p in self.params:
            seen.setdefault(p.module, None)
        return list(seen)

    def module_norms(self, step: StepRecord) -> dict[str, float | None]:
        """Per-module gradient norm at a step: sqrt of the sum of its parameters' squares."""
        acc: dict[str, float | None] = {}
        for p, n in zip(self.params, step.norm):
            if n is None:
                acc.setdefault(p.module, None)
                continue
            prev = acc.get(p.module)
            acc[p.module] = n * n + (prev or 0.0)
        return {m: (math.sqrt(v) if v is not None else None) for m, v in acc.items()}

    def module_update_ratios(self, step: StepRecord) -> dict[str, float | None]:
        """Per-module ``||update|| / ||weight||`` at a step."""
        up: dict[str, float] = {}
        wn: dict[str, float] = {}
        for p, u, w in zip(self.params, step.update_norm, step.weight_norm):
            if u is None or w is None:
                continue
            up[p.module] = up.get(p.module, 0.0) + u * u
            wn[p.module] = wn.get(p.module, 0.0) + w * w
        return {m: (math.sqrt(up[m] / wn[m]) if wn[m] > 0 else None) for m in up}


@dataclass(frozen=True)
class Report:
    """The result of a watch: tracks plus findings. Render with the methods below."""

    tracks: tuple[Track, ...] = ()
    findings: tuple[Finding, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    # ----------------------------------------------------------------- rendering
    def summary(self, width: int | None = None) -> str:
        """A terminal summary (uses rich when installed, plain text otherwise)."""
        from gradtrace.report.text import render_summary

        return render_summary(self, width=width)

    def save_html(self, path: str | Path) -> Path:
        """Write one self-contained HTML file (inline SVG charts, no external files)."""
        from gradtrace.report.html import write_html

        return write_html(self, Path(path))

    def save_png(self, path: str | Path) -> Path:
        """Write the charts as one PNG image (needs matplotlib)."""
        from gradtrace.report.plot import save_png

        return save_png(self, Path(path))

    def _repr_html_(self) -> str:
        from gradtrace.report.html import render_html

        return render_html(self, standalone=False)

    def __rich__(self) -> Any:
        from gradtrace.report.text import rich_renderable

        return rich_renderable(self)

    # ----------------------------------------------------------------- JSON
    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (non-finite floats become strings)."""
        return {
            "schema": SCHEMA_VERSION,
            "tool": "gradtrace",
            "meta": self.meta,
            "tracks": [_track_to_dict(t) for t in self.tracks],
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        """Inverse of :meth:`to_dict`."""
        if d.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"unsupported gradtrace report schema {d.get('schema')!r}; "
                             f"expected {SCHEMA_VERSION}")
        return cls(tracks=tuple(_track_from_dict(t) for t in d.get("tracks", ())),
                   findings=tuple(Finding.from_dict(f) for f in d.get("findings", ())),
                   meta=dict(d.get("meta", {})))

    def to_json(self, indent: int | None = None) -> str:
        """The report as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> Report:
        """Parse a string made by :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    def codes(self) -> list[str]:
        """The finding codes, in order (handy in tests and scripts)."""
        return [f.code for f in self.findings]


# --------------------------------------------------------------------------- JSON helpers
def enc_float(x: float | None) -> float | str | None:
    """Encode a float for JSON: NaN and infinities become strings."""
    if x is None or math.isfinite(x):
        return x
    if math.isnan(x):
        return "nan"
    return "inf" if x > 0 else "-inf"


def dec_float(x: Any) -> float | None:
    """Inverse of :func:`enc_float`."""
    if x is None:
        return None
    return float(x)


def _enc_seq(xs: Sequence[float | None]) -> list[Any]:
    return [enc_float(x) for x in xs]


def _dec_seq(xs: Iterable[Any]) -> tuple[float | None, ...]:
    return tuple(dec_float(x) for x in xs)


def _step_to_dict(s: StepRecord) -> dict[str, Any]:
    return {"step": s.step, "loss": enc_float(s.loss), "norm": _enc_seq(s.norm),
            "max_abs": _enc_seq(s.max_abs), "zero_frac": _enc_seq(s.zero_frac),
            "nonfinite": list(s.nonfinite), "update_norm": _enc_seq(s.update_norm),
            "weight_norm": _enc_seq(s.weight_norm)}


def _step_from_dict(d: dict[str, Any]) -> StepRecord:
    return StepRecord(step=d["step"], loss=dec_float(d.get("loss")), norm=_dec_seq(d["norm"]),
                      max_abs=_dec_seq(d["max_abs"]), zero_frac=_dec_seq(d["zero_frac"]),
                      nonfinite=tuple(d["nonfinite"]), update_norm=_dec_seq(d["update_norm"]),
                      weight_norm=_dec_seq(d["weight_norm"]))


def _plain(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def _track_to_dict(t: Track) -> dict[str, Any]:
    params = []
    for p in t.params:
        d = _plain(p)
        d["shape"] = list(p.shape)
        params.append(d)
    return {"name": t.name, "params": params, "summaries": [_plain(s) for s in t.summaries],
            "steps": [_step_to_dict(s) for s in t.steps], "total_steps": t.total_steps,
            "every": t.every, "stride": t.stride, "has_optimizer": t.has_optimizer,
            "nan_source": _plain(t.nan_source) if t.nan_source else None,
            "path": t.path, "line": t.line, "recorded": t.recorded}


def _track_from_dict(d: dict[str, Any]) -> Track:
    params = tuple(ParamInfo(**{**p, "shape": tuple(p["shape"])}) for p in d["params"])
    nan = d.get("nan_source")
    return Track(name=d["name"], params=params,
                 summaries=tuple(ParamSummary(**s) for s in d["summaries"]),
                 steps=tuple(_step_from_dict(s) for s in d["steps"]),
                 total_steps=d["total_steps"], every=d.get("every", 1),
                 stride=d.get("stride", 1), has_optimizer=d.get("has_optimizer", False),
                 nan_source=NanSource(**nan) if nan else None,
                 path=d.get("path", "<unknown>"), line=d.get("line", 1),
                 recorded=d.get("recorded"))
