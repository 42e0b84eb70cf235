"""Findings derived from recorded tracks (torch-free; runs when a report is built).

Thresholds are deliberately conservative (precision first): a correct small model that
trains normally must produce no finding. Each check states its threshold next to it.
"""
from __future__ import annotations

import math
import statistics
from typing import Iterable, Iterator

from gradtrace.findings import Finding, Related
from gradtrace.report.model import ParamInfo, Track
from gradtrace.report.numbers import fmt
from gradtrace.codes import name_of

VANISH_ORDERS = 3.0       # early layers >= 3 orders of magnitude below late layers
EXPLODE_ORDERS = 3.0      # growth over training or across depth, orders of magnitude
DEAD_FRACTION = 0.5       # at least half of a layer's units dead ...
DEAD_MIN_STEPS = 5        # ... over at least this many watched steps
STALL_MIN_STEPS = 3       # stalled at every one of at least this many watched steps
_NO_DEPTH = ("Embedding", "EmbeddingBag")


def analyze(tracks: Iterable[Track]) -> list[Finding]:
    """All watch findings for the given tracks, in a stable order."""
    out: list[Finding] = []
    for t in tracks:
        if t.recorded_steps == 0 or not t.steps:
            continue
        dead_modules = {f_mod for f_mod, _ in _dead(t)}
        out.extend(_nonfinite(t))
        out.extend(_never_graded(t, dead_modules))
        out.extend(_not_in_optimizer(t))
        depth = list(_depth(t))
        out.extend(depth)
        out.extend(_growth(t))
        out.extend(f for _, f in _dead(t))
        vanishing = any(f.code == "GT852" for f in depth)
        out.extend(_stalled(t, only_if_all=vanishing))
    return out


def _finding(code: str, t: Track, message: str, severity: str = "warning",
             where: ParamInfo | None = None, path: str | None = None,
             line: int | None = None, related: tuple[Related, ...] = ()) -> Finding:
    if path is None and where is not None and where.path:
        path, line = where.path, where.line
    if path is None:
        path, line = t.path, t.line
    rel = list(related)
    if (path, line) != (t.path, t.line) and t.path != "<unknown>":
        rel.append(Related(t.path, t.line, "watched here"))
    line = line or 1
    return Finding(code=code, name=name_of(code), message=message, path=path, line=line,
                   end_line=line, end_column=0, severity=severity,  # type: ignore[arg-type]
                   related=tuple(rel), source="runtime")


def _label(p: ParamInfo) -> str:
    return f"`{p.module or '<model>'}` ({p.module_type or 'tensor'})"


def _by_module(t: Track, idx: list[int]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i in idx:
        groups.setdefault(t.params[i].module, []).append(i)
    return groups


# ------------------------------------------------------------------------- GT850 / GT856
def _never_graded(t: Track, skip_modules: set[str]) -> Iterator[Finding]:
    n = t.recorded_steps
    idx = [i for i, (p, s) in enumerate(zip(t.params, t.summaries))
           if p.requires_grad and s.graded_steps == 0 and s.nonfinite_steps == 0
           and p.module not in skip_modules]
    for mod, ids in _by_module(t, idx).items():
        p0 = t.params[ids[0]]
        names = ", ".join(f"`{t.params[i].name}`" for i in ids)
        zeros = any(t.summaries[i].zero_grad_steps for i in ids)
        how = "only all-zero gradients" if zeros else "no gradient (`.grad` stayed None)"
        yield _finding(
            "GT850", t,
            f"{_label(p0)}: {names} got {how} in all {n} watched steps, so "
            f"{'it never trains' if len(ids) == 1 else 'they never train'}. Nothing in the "
            "loss depends on them: an unused layer or head, outputs that are dropped, or a "
            "`.detach()` / `torch.no_grad()` upstream cut the graph (see GT107, GT201; "
            "`gradtrace run` names the line). If this is "
            "intended, set `requires_grad_(False)` on them.", where=p0)


def _not_in_optimizer(t: Track) -> Iterator[Finding]:
    idx = [i for i, (p, s) in enumerate(zip(t.params, t.summaries))
           if p.requires_grad and p.in_optimizer is False and s.graded_steps > 0]
    for mod, ids in _by_module(t, idx).items():
        p0 = t.params[ids[0]]
        names = ", ".join(f"`{t.params[i].name}`" for i in ids)
        yield _finding(
            "GT856", t,
            f"{_label(p0)}: {names} receive gradients but are not in the watched optimizer, so "
            "`optimizer.step()` never updates them. Typical cause: the optimizer was built "
            "before the module was replaced or added (or from another copy of the model). "
            "Build the optimizer from `model.parameters()` after the model is final.",
            where=p0)


# ------------------------------------------------------------------------- GT851
def _nonfinite(t: Track) -> Iterator[Finding]:
    bad = [i for i, s in enumerate(t.summaries) if s.nonfinite_steps]
    if not bad:
        return
    first = min(t.summaries[i].first_nonfinite_step or 0 for i in bad)
    names = [t.params[i].name for i in bad if t.summaries[i].first_nonfinite_step == first]
    shown = ", ".join(f"`{n}`" for n in names[:4]) + (" ..." if len(names) > 4 else "")
    src = t.nan_source
    msg = f"gradients became NaN/Inf at step {first} (in {shown})."
    path = line = None
    if src is not None:
        msg += f" Source: {src.detail}."
        if src.path:
            path, line = src.path, src.line
            msg += f" First non-finite value computed at {src.path}:{src.line}."
        if src.kind == "forward":
            msg += (" Guard the operation (e.g. `log(x.clamp_min(eps))`, `sqrt(x + eps)`, "
                    "a safe denominator) or fix the input range that reaches it.")
        elif src.kind == "backward":
            msg += " Add an epsilon inside the function whose derivative is infinite at 0."
    yield _finding("GT851", t, msg, severity="error", path=path, line=line)


# ------------------------------------------------------------------------- GT852 / GT853
def _layer_scores(t: Track) -> list[tuple[int, float]]:
    """Per weight matrix (depth order): median relative gradient over the watched steps."""
    out = []
    for i, p in enumerate(t.params):
        if len(p.shape) < 2 or not p.requires_grad or p.module_type in _NO_DEPTH:
            continue
        vals = []
        for s in t.steps:
            g, w = s.norm[i], s.weight_norm[i]
            if g is None or not math.isfinite(g) or g <= 0:
                continue
            if w is not None and w > 0:
                vals.append(g / w)
            elif w is None:
                vals.append(g / math.sqrt(p.numel))
        if vals:
            out.append((i, statistics.median(vals)))
    return out


def _depth(t: Track) -> Iterator[Finding]:
    """GT852/GT853 across depth: the median score of the first third of the weight layers
    against that of the last third (medians, so one odd layer decides nothing)."""
    scores = _layer_scores(t)
    if len(scores) < 3:
        return
    k = max(1, math.ceil(len(scores) / 3))
    early, late = scores[:k], scores[-k:]
    e_med = statistics.median(v for _, v in early)
    l_med = statistics.median(v for _, v in late)
    kind = "relative gradient ||g||/||w||" if t.has_optimizer else "gradient RMS"
    if e_med * 10 ** VANISH_ORDERS <= l_med:
        p_e = t.params[min(early, key=lambda s: s[1])[0]]
        p_l = t.params[max(late, key=lambda s: s[1])[0]]
        yield _finding(
            "GT852", t,
            f"gradients vanish toward the input: the median {kind} of the first {k} weight "
            f"layer(s) is {fmt(e_med)}, of the last {k} {fmt(l_med)} "
            f"({math.log10(l_med / e_med):.1f} orders of magnitude; lowest at `{p_e.name}`, "
            f"highest at `{p_l.name}`), so the early layers barely train. Typical causes: "
            "saturating activations (sigmoid/tanh) in a deep stack, no normalization or "
            "residual connections, too-small init. Use ReLU/GELU, residual connections, "
            "normalization layers or Kaiming/Xavier init.", where=p_e)
    elif e_med >= l_med * 10 ** EXPLODE_ORDERS:
        p_e = t.params[max(early, key=lambda s: s[1])[0]]
        yield _finding(
            "GT853", t,
            f"gradients explode toward the input: the median {kind} of the first {k} weight "
            f"layer(s) is {fmt(e_med)}, of the last {k} {fmt(l_med)} "
            f"({math.log10(e_med / l_med):.1f} orders of magnitude; highest at "
            f"`{p_e.name}`). Use normalization layers, a smaller init scale, or gradient "
            "clipping (`torch.nn.utils.clip_grad_norm_`).", where=p_e)


def _total_norms(t: Track) -> list[tuple[int, float]]:
    out = []
    for s in t.steps:
        vals = [n for n in s.norm if n is not None]
        if vals and all(math.isfinite(v) for v in vals):
            out.append((s.step, math.sqrt(sum(v * v for v in vals))))
    return out


def _growth(t: Track) -> Iterator[Finding]:
    norms = _total_norms(t)
    if len(norms) < 10:
        return
    k = max(3, len(norms) // 10)
    early = statistics.median(n for _, n in norms[:k])
    step, late = max(norms[k:], key=lambda sn: sn[1])
    if early > 0 and late >= early * 10 ** EXPLODE_ORDERS:
        yield _finding(
            "GT853", t,
            f"the total gradient norm grew from {fmt(early)} (median of the first {k} watched "
            f"steps) to {fmt(late)} at step {step} ({math.log10(late / early):.1f} orders of "
            "magnitude): training is diverging. Lower the learning rate, add warm-up, or clip "
            "gradients (`torch.nn.utils.clip_grad_norm_`).")


# ------------------------------------------------------------------------- GT854
def _dead(t: Track) -> list[tuple[str, Finding]]:
    out = []
    n = t.recorded_steps
    if n < DEAD_MIN_STEPS:
        return out
    for p, s in zip(t.params, t.summaries):
        if not s.units or s.dead_units is None or s.units < 4 or s.nonfinite_steps:
            continue
        if s.dead_units < DEAD_FRACTION * s.units:
            continue
        unit = "channels" if p.module_type.startswith(("Conv", "BatchNorm")) else "units"
        out.append((p.module, _finding(
            "GT854", t,
            f"{_label(p)}: {s.dead_units} of {s.units} output {unit} got an exactly zero "
            f"gradient at every one of {n} watched steps: they are dead and never learn. "
            "Typically ReLU units whose input is negative for every example (learning rate "
            "too high, strongly negative bias, bad init). Try a lower learning rate, "
            "LeakyReLU/GELU, or re-initialising the layer.", where=p)))
    return out


# ------------------------------------------------------------------------- GT855
def _stalled(t: Track, only_if_all: bool = False) -> Iterator[Finding]:
    """GT855; with ``only_if_all`` (vanishing already reported, which explains tiny updates
    of the early layers) only when no trainable parameter moves at all."""
    idx = [i for i, (p, s) in enumerate(zip(t.params, t.summaries))
           if p.in_optimizer and s.updated_steps >= STALL_MIN_STEPS
           and s.zero_update_steps == s.updated_steps]
    moving = [i for i, (p, s) in enumerate(zip(t.params, t.summaries))
              if p.in_optimizer and s.updated_steps > s.zero_update_steps]
    if not idx or (only_if_all and moving):
        return
    names = ", ".join(f"`{t.params[i].name}`" for i in idx[:6]) + (" ..." if len(idx) > 6
                                                                   else "")
    n = min(t.summaries[i].updated_steps for i in idx)
    yield _finding(
        "GT855", t,
        f"{len(idx)} parameter(s) ({names}) had non-zero gradients at each of {n}+ watched "
        "steps, but `optimizer.step()` never changed them (update/weight below 1e-10): the "
        "learning rate is 0 (check the scheduler and the param group) or the update is "
        "below float precision.", where=t.params[idx[0]])
