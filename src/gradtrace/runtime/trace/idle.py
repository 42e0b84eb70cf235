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

CODE = "GT840"
CODE_STALE = "GT849"


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


def stale_now(state: TraceState, data: HookState, rec: Any) -> Finding | None:
    """:func:`_stale` at one of the optimizer's empty steps, while it lives (NOTE [replaced
    under the optimizer]); the minimum count of empty steps is asked at the end of the run."""
    if _toggled(state, data, rec) is not None:
        return None
    return _stale(state, data, rec, at_step=True)


def _params(rec: Any) -> list[torch.Tensor]:
    opt = rec.ref()
    return [] if opt is None else [p for g in opt.param_groups for p in g["params"]]


def _last_freeze(state: TraceState, params: list[torch.Tensor]) -> Site | None:
    """Where the most recently frozen of ``params`` was frozen (state.freeze keeps the latest
    freeze last)."""
    ids = {id(p) for p in params}
    last = None
    for key, (ref, site) in list(state.freeze.items()):
        if key in ids and ref() is not None:
            last = site
    return last


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


def _toggled(state: TraceState, data: HookState, rec: Any) -> Finding | None:
    params = _params(rec)
    site = _last_freeze(state, params)
    if site is None:
        return None
    names = [param_name(data, p) for p in params[:3]]
    return make(CODE, site,
                f"{', '.join(names)}{' and more' if len(params) > 3 else ''} got gradients up "
                f"to step {rec.last_graded} only: at the {rec.trailing_empty} steps since, they "
                f"require grad when step() runs but have no gradient; they are frozen here "
                "after the step and unfrozen only around it, so backward() never reaches them",
                fix="unfreeze before the forward pass and backward() (or do not freeze them at "
                    "all if this optimizer should train them)",
                related=[(rec.site, "the optimizer steps here with no gradient")],
                severity="warning")


def _stale(state: TraceState, data: HookState, rec: Any, at_step: bool = False
           ) -> Finding | None:
    """# NOTE [replaced under the optimizer]
    An optimizer found gradients up to some step, then none at the later steps although its
    tensors still require grad, nothing froze them, and backward() ran at least once per step
    since: the loss no longer reaches the tensors it holds. The program replaced them (a
    tensor re-made with ``.detach().to(...).requires_grad_()``, a model re-created) after the
    optimizer was built; backward() fills the new ones' ``.grad`` and nothing applies it. A
    part trained in a phase and then left alone is not stepped, so it is not reported; one
    stepped with its gradients still set is not empty. When the new tensors are parameters of
    a module that ran, GT821 reports them with the line that added them (the session's
    ``silent_findings`` then leaves this one out). When every tensor it holds is still a
    registered parameter of a live module that ran, nothing replaced them: the losses since
    only do not use that module (a decoder trained by the first loss of a step and left out
    of the next ones), and a later loss that uses it reaches them again; not reported."""
    params = _params(rec)
    since = state.backward_count - rec.graded_backwards
    ran = since >= rec.trailing_empty or rec.graded_others >= 2  # backward() went elsewhere
    if not params or not ran or not at_step and rec.trailing_empty < max(2, rec.steps // 4) \
            or not all(p.requires_grad and p.grad is None for p in params) \
            or _registered(data, params):
        return None
    held = {id(p) for r in list(data.optimizers.values()) for p in _params(r)}
    names = [param_name(data, p) for p in params[:3]]
    new = _remade(state, held, {tuple(p.shape) for p in params})
    return make(CODE_STALE, new or rec.site,
                f"{', '.join(names)}{' and more' if len(params) > 3 else ''} got gradients up "
                f"to step {rec.last_graded} only: backward() ran at the {rec.trailing_empty} "
                "steps since and never reached them although they still require grad, so the loss no longer uses the tensors "
                "this optimizer holds; " + (
                    "the tensor the loss uses now was made here, after the optimizer was built, "
                    "and its gradients are applied by nothing" if new else
                    "if they were replaced (re-made, re-created) after the optimizer was built, "
                    "the new ones' gradients are applied by nothing"),
                fix="build the optimizer after the last replacement, or re-create it (or "
                    "add_param_group) whenever the tensors it holds are replaced",
                related=[(s, w) for s, w in ((new and rec.site, "its step() finds nothing to "
                                              "apply here"),
                                             (built_at(rec.site), "the optimizer was built here"))
                         if s],
                severity="warning")


def _registered(data: HookState, params: list[torch.Tensor]) -> bool:
    """Every tensor of ``params`` is a registered parameter of a live module that ran."""
    owned: set[int] = set()
    for mrec in list(data.modules.values()):
        m = mrec.ref()
        if m is not None:
            owned.update(id(p) for p in m._parameters.values() if p is not None)
    return all(id(p) in owned for p in params)


def _remade(state: TraceState, held: set[int], shapes: set[tuple[int, ...]]) -> Site | None:
    """Where a live leaf tensor of one of ``shapes``, held by no optimizer, that received a
    gradient was set to require grad: the new tensor that replaced the held one."""
    for ref, site in reversed(list(state.made_leaves.values())):
        t = ref()
        if t is not None and id(t) not in held and t.grad is not None \
                and tuple(t.shape) in shapes:
            return site
    return None


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
