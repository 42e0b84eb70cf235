"""# NOTE [trained while switched on, built while switched off]

A program that switches which parameters train by flipping ``requires_grad`` (several adapters
on one base model, PEFT's ``set_adapter``; a schedule that freezes and thaws a part) and builds
an optimizer from ``[p for p in model.parameters() if p.requires_grad]`` gets the parameters
that were switched on *when the optimizer was built*. Parameters that were switched on for
their own backward() (they hold a gradient) but off when the optimizers were built are in no
optimizer: their gradients pile up and nothing ever applies them. GT821's main pass
(``silent._params_in_no_optimizer``) looks only at parameters that still require grad when
tracing ends; these are switched off again by then (the next adapter was activated), so it
never sees them.

Decided from the run only: a parameter of a module that ran with grad, which holds a gradient,
is held by no optimizer that exists, no longer requires grad, and was both switched off and
switched on by the program (``state.frozen_at`` and ``state.unfrozen_at``: it was toggled,
not frozen once as a pretrained part is); at least one optimizer stepped, and the optimizers
that stepped hold tensors that were toggled the same way (their lists were taken from the same
switch). Not reported: a parameter frozen once (a backbone), a toggled parameter an optimizer
holds (a GAN's discriminator frozen during the generator's step), a part left out on purpose
or copied into (a target network). Named: the line that listed the parameters for the
optimizers (they are all built at one line, from one list), else their constructor; kind
``unfrozen-after-optimizer`` (static twin GT410).
"""
from __future__ import annotations

from typing import Any

from gradtrace.runtime.build import src
from gradtrace.runtime.trace.intent import left_out_on_purpose


def refrozen_findings(state: Any, data: Any, in_opt: set[int], groups: dict) -> None:
    """Adds the group of NOTE [trained while switched on, built while switched off] to
    ``groups`` (the GT821 groups of ``silent._params_in_no_optimizer``)."""
    steppers = [r for r in list(data.optimizers.values()) if r.steps and r.ref() is not None]
    if not steppers or not (state.freeze and state.unfreeze):
        return
    held = [p for r in steppers for g in r.ref().param_groups for p in g["params"]]
    if not any(_toggled(state, p) for p in held):
        return  # the optimizers' lists do not come from the switch
    from gradtrace.runtime.trace.hooks import param_name

    missed, seen = [], set()
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or rec.grad_runs == 0:
            continue
        mine = [p for p in m.parameters()  # (a ParameterDict's never runs: its owner's)
                if not p.requires_grad and p.grad is not None
                and id(p) not in in_opt and _toggled(state, p) and state.cut_of(p) is None]
        if mine and not rec.copied_into(m, data, in_opt):
            missed.extend(p for p in mine if id(p) not in seen)
            seen.update(id(p) for p in mine)
    names = [param_name(data, p) for p in missed]
    if not missed or left_out_on_purpose(data, names):
        return
    site = _listed(data, steppers)
    if site is None:
        return
    switched = state.unfrozen_at(missed)
    groups.setdefault(
        ("unfrozen-after-optimizer", site,
         "the optimizer(s) built here took the parameters that required grad at that moment; "
         f"these were switched off then and switched on only for their own backward() "
         f"({src(switched)}), so no optimizer holds them and their gradients are never applied",
         "build each optimizer from the parameters it should train (not from the "
         "requires_grad filter of the moment), or add them as a parameter group"),
        []).extend(names)


def _toggled(state: Any, p: Any) -> bool:
    return state.frozen_at(p) is not None and state.unfrozen_at([p]) is not None


def _listed(data: Any, steppers: list[Any]) -> Any:
    """The one line that listed the parameters of every optimizer that stepped, else their one
    constructor line; None when they were built at different lines."""
    from gradtrace.runtime.trace.param_lists import listed_at
    from gradtrace.runtime.trace.wiring import optimizer_built_at

    built = {optimizer_built_at(data, r, r.ref()) for r in steppers}
    if len(built) != 1 or None in built:
        return None
    site = built.pop()
    return listed_at(site) or site
