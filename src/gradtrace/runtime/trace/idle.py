"""Optimizer steps that had nothing to apply: the run looks like training, nothing trains.

# NOTE [idle steps]
The step pre-hook sees, at every ``optimizer.step()``, whether any parameter the optimizer
holds has a ``.grad`` (for ``step(closure)`` it looks again after the step: the closure's
backward() runs inside it) and whether any of them requires grad. Three patterns are reported,
each only from what the run saw:

- every step of every optimizer found all its parameters frozen (``requires_grad=False``) while
  backward() did run: the loss was made to require grad by hand (``loss.requires_grad = True``)
  or reaches nothing trainable; the finding names the freeze that ran last (the one that left
  nothing to train);
- optimizers stepped (at least twice) with parameters that require grad, no optimizer ever found
  a gradient, and no backward() ran at all: the backward is missing (an LBFGS closure that only
  returns the loss); the finding names the step, the closure as context;
- an optimizer found gradients on its first steps, then none at two or more later steps in a
  row although its parameters require grad at those steps, and they were frozen somewhere:
  ``requires_grad`` is switched on around ``step()`` and off after it, so every later
  backward() skips them. The finding names that freeze.

A deliberate freeze after a warm-up leaves the parameters frozen at the steps (not reported);
an optimizer over a frozen part while another one trains is left alone too.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.hooks import HookState, param_name
from gradtrace.runtime.trace.probe_stats import probe_findings
from gradtrace.runtime.trace.state import TraceState
from gradtrace.runtime.trace.wiring import built_at

from gradtrace.runtime.trace.stale_steps import _last_freeze, _params, _stale, _toggled

CODE = "GT840"  # (stale_steps makes it too, for a freeze toggled around the steps)


def idle_findings(state: TraceState, data: HookState) -> list[Finding]:
    """The findings of NOTE [idle steps]."""
    stepped = [r for r in list(data.optimizers.values()) if r.steps]
    live = [r for r in stepped if r.ref() is not None]
    if not stepped:
        return []
    trained = any(r.last_graded for r in stepped)
    out: list[Finding] = []
    if not trained:
        frozen = [r for r in stepped if r.frozen_steps == r.steps]
        if state.backward_count and frozen and len(frozen) == len(stepped) == len(live):
            out.append(_all_frozen(state, data, frozen))
        empty = [r for r in stepped if r.steps >= 2 and r.empty_steps == r.steps]
        if not state.backward_count and empty:
            out.append(_no_backward(empty[0]))
    if trained:
        out += moving_statistics(state, data) or probe_findings(state, data, param_name)
    for rec in stepped:
        if rec.last_graded and rec.trailing_empty >= 2 \
                and rec.trailing_empty == rec.steps - rec.last_graded:
            if rec.ref() is None:  # gone with the function that built it: as seen then
                found = rec.stale if rec.trailing_empty >= max(2, rec.steps // 4) else None
            else:
                found = _toggled(state, data, rec) or _stale(state, data, rec)
            if found is not None:
                out.append(found)
    return out


def _all_frozen(state: TraceState, data: HookState, recs: list[Any]) -> Finding:
    rec = recs[0]
    params = [p for r in recs for p in _params(r)]
    site = _last_freeze(state, params)
    others = [s for s in state.frozen_sites() if s != site][:3]
    return make(CODE, site or built_at(rec.site) or rec.site,
                f"none of the {len(params)} parameters the optimizer holds requires grad at any "
                f"of its {rec.steps} steps" + (f": the last of them was frozen here "
                                                f"({src(site)}), leaving nothing to train" if site
                                                else "") +
                "; backward() still ran (the loss was made to require grad), so the run looks "
                "like training while no weight changes",
                fix="leave trainable the part that should learn (requires_grad_(True)); do not "
                    "set requires_grad on the loss to silence the error",
                related=[(s, "also frozen here") for s in others] +
                [(rec.site, "the optimizer steps here with nothing to update")],
                severity="warning")


def _no_backward(rec: Any) -> Finding:
    code = rec.closure
    closure = Site(code.co_filename, code.co_firstlineno, code.co_name) if code else None
    what = ("the closure given to step() never calls backward(), so the optimizer only sees "
            "the loss value" if closure else "backward() is never called")
    return make(CODE, rec.site,
                f"optimizer.step() ran {rec.steps} times and never found a gradient on any of "
                f"its parameters: no backward() ran in the whole run; {what}",
                fix="compute the loss and call loss.backward() before each step (inside the "
                    "closure for LBFGS-like optimizers: zero_grad, loss, backward, return loss)",
                related=[(closure, "the closure is defined here")] if closure else [],
                severity="warning")


def moving_statistics(state: TraceState, data: HookState) -> list[Finding]:
    """# NOTE [moving statistics]
    A norm layer (BatchNorm, InstanceNorm with running statistics) whose affine parameters the
    program froze (``requires_grad=False``, the freeze seen) but that runs in train mode with
    grad on while an optimizer trains something else: each of those forwards still updates its
    ``running_mean``/``running_var``, so the layer meant to be fixed keeps changing (and so do
    its eval-mode outputs). Freezing by ``requires_grad`` alone does not freeze statistics; the
    layer has to be put in ``eval()`` (after every ``model.train()``). A layer frozen and put in
    eval mode, or run under ``no_grad`` only, is not reported; nor is a freeze line that also
    froze other layers' parameters (a stage or backbone frozen as a whole, whose statistics
    are commonly left to adapt, as YOLO's ``freeze`` does): only a freeze aimed at the
    normalisation layers themselves says they should not change. One finding per freeze
    line."""
    groups: dict[Site, list[str]] = {}
    norm = {id(p) for r in list(data.modules.values()) if isinstance(r.ref(), _NormBase)
            for p in r.ref()._parameters.values() if p is not None}  # type: ignore[union-attr]
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or not rec.stats_frozen:
            continue
        ps = [p for p in m._parameters.values() if p is not None]
        sites = [state.frozen_at(p) for p in ps]
        if ps and all(sites) and not any(p.requires_grad for p in ps) \
                and _norm_only(state, sites[0], norm):  # type: ignore[arg-type]
            groups.setdefault(sites[0], []).append(  # type: ignore[arg-type]
                param_name(data, ps[0]).rpartition(".")[0] or type(m).__name__)
    return [make("GT841", site, f"{', '.join(names[:3])}{' and more' if len(names) > 3 else ''}"
                 f" {'is' if len(names) == 1 else 'are'} frozen here by requires_grad=False, but "
                 "ran in train mode while the model trained: the running mean and variance "
                 "still change at every forward, so the frozen normalisation keeps moving",
                 fix="also put the frozen normalisation layers in eval() after every "
                     "model.train() (or keep them out of the forward in train mode)",
                 severity="warning") for site, names in groups.items()]


def _norm_only(state: TraceState, site: Site, norm: set[int]) -> bool:
    """Every live tensor frozen at ``site`` is a parameter of a normalisation layer."""
    return all(key in norm for key, (ref, at) in list(state.freeze.items())
               if at == site and ref() is not None)


_NormBase = torch.nn.modules.batchnorm._NormBase
