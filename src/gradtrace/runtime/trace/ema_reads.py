"""An average of the parameters (EMA, mean teacher) updated more often than they change.

# NOTE [EMA between steps]
An exponential moving average ``ema_p.mul_(d).add_(p, alpha=1 - d)`` (or ``ema_p.lerp_(p, w)``)
is meant to follow the trained weights once per optimizer step. Called once per micro-batch of a
gradient accumulation (or once per iteration while the optimizer steps every few), most updates
average the same weights again: the average moves ``k`` times per step, its decay per step is
``d ** k`` instead of ``d``, and it lags or leads the model by a different horizon than the one
set. Nothing fails.

The provenance mode sees each in-place ``add_``/``lerp_`` whose second argument is an
``nn.Parameter`` (another tensor averaged towards it). The first 8 such parameters are followed
(ids, a weak reference, their version counter: an optimizer step bumps it): each read notes
whether the parameter changed since the previous read, and, at the first read that found it
unchanged, the user stack. When the trace ends, a followed parameter that an optimizer holds and
stepped, that changed between reads at least once, and that at least 3 reads found unchanged,
at least one for every two reads that found it changed (an average updated on every other
iteration or more; a step skipped now and then, a ``GradScaler`` meeting an inf, is not) is
reported at the line of the stack that sits in the function
stepping the optimizer (the update's call in the training loop), else at the update itself. An
average updated right after each step, a hard copy (``copy_``, which is idempotent), and a
parameter never stepped are silent.
"""
from __future__ import annotations

import weakref
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site, is_internal, user_frame
from gradtrace.runtime.trace.hooks import param_name

_FOLLOWED = 8
_AVERAGING = ("add_", "lerp_")


def note_average(state: Any, name: str, args: tuple[Any, ...]) -> None:
    """From an in-place op whose second argument is a Parameter (``name``: the op's name)."""
    if name not in _AVERAGING or args[0] is args[1]:
        return
    p = args[1]
    reads = state.ema_reads
    entry = reads.get(id(p))
    if entry is None or entry[0]() is not p:
        if len(reads) >= _FOLLOWED:
            return
        reads[id(p)] = [weakref.ref(p), p._version, 1, 0, 0, None]
        return
    entry[2] += 1
    if p._version == entry[1]:
        entry[3] += 1
        if entry[5] is None:
            entry[5] = [_stack(), None, ""]
        data = state.hooks_data
        if entry[5][1] is None and data is not None and data.optimizers:
            # the optimizer and the name now: the model may not outlive the run
            rec = entry[5][1] = _stepper(data, p)
            entry[5][2] = rec and param_name(data, p)
    else:
        entry[4] += 1
        entry[1] = p._version


def _stack() -> list[Site]:
    f = user_frame(3)
    out: list[Site] = []
    while f is not None and len(out) < 12:
        if not is_internal(f.f_code):
            out.append(Site(f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return out


def ema_findings(state: Any) -> list[Finding]:
    """NOTE [EMA between steps]."""
    out: list[Finding] = []
    sites: set[Site] = set()
    for _, _, reads, stale, changed, seen in list(state.ema_reads.values()):
        if stale < 3 or not changed or seen is None or 2 * stale < changed:
            continue
        stack, rec, name = seen
        if rec is None or not rec.steps or not stack:
            continue
        site = next((s for s in stack if rec.site is not None and s.path == rec.site.path
                     and s.function == rec.site.function), stack[0])
        if site in sites:
            continue
        sites.add(site)
        out.append(make(
            "GT890", site,
            f"the moving average updated here read {name} {reads} times, and "
            f"{stale} of those updates found it unchanged since the previous one (no optimizer "
            f"step between them; the optimizer stepped {rec.steps} times): the average moves "
            "several times per optimizer step, so its decay per step is not the one set",
            fix="update the average once per optimizer step (inside the branch that steps, "
                "after optimizer.step())",
            related=[(rec.site, "the optimizer steps here")], severity="warning"))
    return out


def _stepper(data: Any, p: Any) -> Any:
    for rec in list(data.optimizers.values()):
        opt = rec.ref()
        if opt is not None and any(q is p for g in opt.param_groups
                                                 for q in g["params"]):
            return rec
    return None
