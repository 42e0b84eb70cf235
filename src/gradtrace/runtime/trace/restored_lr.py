"""GT899: a resumed optimizer trains at the checkpoint's learning rate, not the one it was built with.

# NOTE [learning rate restored by a load]
``Optimizer.load_state_dict`` replaces the param groups with the saved ones, hyper-parameters
included: an optimizer built with a new ``lr`` (a run resumed with ``--lr 0.001``) and then
loaded trains at the checkpoint's ``lr`` (PyTorch examples#816: the fix sets each group's
``lr`` again after the load). NOTE [loaded state thrown away] already sees the load (a state
holding tensors: ``Tensor.to`` from ``_process_value_according_to_param_policy``); at that
moment the groups are still the constructor's and the frame of ``load_state_dict`` holds the
saved ones (``saved_groups``), so both learning rates are read there, once per optimizer. At
the end, reported when for some group the saved ``lr`` differs from the built one, the saved
group has no ``initial_lr`` (a scheduler ran in the saved run: its ``lr`` is the schedule's,
restored on purpose), the optimizer stepped after the load, and its group still holds the
saved ``lr`` (never set again). Named: the load. A resume with the ``lr`` the checkpoint has,
or one that sets the new ``lr`` after loading, is silent.
"""
from __future__ import annotations

import sys
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site


def _lr(group: Any) -> float | None:
    v = group.get("lr") if isinstance(group, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def loaded_lrs(opt: Any) -> tuple[tuple[Any, ...], tuple[Any, ...], bool] | None:
    """(the built groups' lr, the saved groups' lr, a saved group has ``initial_lr``), read
    from the running ``load_state_dict`` of ``opt`` (see the NOTE); None if not found."""
    f, limit = sys._getframe(1), 12
    while f is not None and limit > 0:
        if f.f_code.co_name == "load_state_dict" and f.f_locals.get("self") is opt:
            saved = f.f_locals.get("saved_groups")
            if not isinstance(saved, list) or len(saved) != len(opt.param_groups):
                return None
            return (tuple(_lr(g) for g in opt.param_groups), tuple(_lr(g) for g in saved),
                    any(isinstance(g, dict) and "initial_lr" in g for g in saved))
        f, limit = f.f_back, limit - 1
    return None


def restored_lr_findings(data: Any) -> list[Finding]:
    """NOTE [learning rate restored by a load]."""
    out: list[Finding] = []
    for load in list(data.opt_loads.values()):
        opt, lrs = load.ref(), load.lrs
        rec = data.optimizers.get(id(opt)) if opt is not None else None
        if lrs is None or lrs[2] or rec is None or rec.ref() is not opt \
                or rec.steps <= load.steps or len(opt.param_groups) != len(lrs[0]):
            continue
        for built, saved, group in zip(lrs[0], lrs[1], opt.param_groups):
            if built is None or saved is None or built == saved or _lr(group) != saved:
                continue
            at = Site(load.stack[0][1].co_filename, load.stack[0][2], load.stack[0][1].co_name) \
                if load.stack else None
            if at is not None:
                out.append(make("GT899", at, f"this load replaced the learning rate the "
                                f"{type(opt).__name__} was built with ({built:g}) by the "
                                f"checkpoint's ({saved:g}): load_state_dict restores the saved "
                                "param groups, hyper-parameters included, and every step after "
                                f"it ran at {saved:g}", fix="set each group's lr again after "
                                "the load (for g in opt.param_groups: g['lr'] = new_lr), or "
                                "drop 'lr' from the saved groups before loading",
                                severity="warning"))
            break
    return out


__all__ = ["loaded_lrs", "restored_lr_findings"]
