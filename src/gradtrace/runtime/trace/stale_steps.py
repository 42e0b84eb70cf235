"""An optimizer whose steps stopped finding gradients: the parameters it holds toggled off
around its steps, or replaced under it (NOTE [replaced under the optimizer]). Judged at the end
of the run for a live optimizer (:mod:`.idle`), and at its own empty steps while it lives (an
optimizer local to a ``fit()`` is gone when the run ends: :class:`.hooks.Hooks` asks
:func:`stale_now` then)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.param_names import param_name
from gradtrace.runtime.trace.wiring import built_at

if TYPE_CHECKING:
    from gradtrace.runtime.trace.hook_state import HookState
    from gradtrace.runtime.trace.state import TraceState

CODE = "GT840"
CODE_STALE = "GT849"


def stale_now(state: TraceState, data: HookState, rec: Any) -> Finding | None:
    """:func:`_stale` at one of the optimizer's empty steps, while it lives; the minimum
    count of empty steps is asked at the end of the run (NOTE [replaced under the optimizer])."""
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
