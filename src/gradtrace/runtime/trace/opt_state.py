"""Optimizer state loaded into an optimizer that never steps: the one that steps was built after.

# NOTE [loaded state thrown away]
``optim.optimizer.load_state_dict(ckpt)`` and then ``optim.set_parameters(...)`` (OpenNMT-py#617),
or a trainer's ``resume()`` that loads the state and a ``fit()`` that builds the optimizer again
(CodefyUI#147): the optimizer that steps starts from zero moments and step counts, the loaded one
is never used. Nothing fails; the resumed run is just not the run it continues.

Two torch calls the tracer sees already tell both events apart from everything else, at the cost
of an identity test on the calling frame: ``Optimizer.load_state_dict`` copies every state tensor
with ``Tensor.to`` from ``Optimizer._process_value_according_to_param_policy`` (a state without
tensors, e.g. plain SGD, has nothing to lose and is never seen), and ``Optimizer.add_param_group``
(run by every optimizer's constructor) reads ``param.is_leaf``. Each event keeps the optimizer
(weakly), a sequence number, the parameter shapes and the user frames (ids and lines). At the end
an optimizer whose state was loaded and that did not step after the load is reported when an
optimizer of the same class over parameters of the same shapes was built after the load and
stepped. The line named is, when the function that loaded the state also led to the new
optimizer, its line that did (``optim.set_parameters(...)``), else the statement that built it.
"""
from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.modes import Stack, common_line, user_stack
from gradtrace.runtime.trace.restored_lr import loaded_lrs

PROCESS_CODE = torch.optim.Optimizer._process_value_according_to_param_policy.__code__


@dataclass
class OptEvent:
    """An optimizer built, or loaded with a state holding tensors."""

    ref: weakref.ref[Any]
    kind: type
    seq: int
    shapes: tuple[tuple[int, ...], ...]
    stack: Stack
    steps: int = 0  # the optimizer's steps when the state was loaded
    rec: Any = None  # its OptimizerRecord then, if it had stepped (it may die since)
    before: int = 0  # built: the most steps any optimizer had made then (summed_outside.py)
    lrs: Any = None  # loaded: NOTE [learning rate restored by a load] (restored_lr.py)


def _shapes(opt: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(p.shape) for g in opt.param_groups for p in g["params"])


def _self_of(f: Any, name: str, limit: int = 8) -> Any:
    while f is not None and limit > 0:
        if f.f_code.co_name == name:
            me = f.f_locals.get("self")
            if isinstance(me, torch.optim.Optimizer):
                return me
        f, limit = f.f_back, limit - 1
    return None


def on_state_loaded(data: Any, seq: int) -> None:
    """``Tensor.to`` called by the optimizer's state loading (caller's frame checked already)."""
    opt = _self_of(sys._getframe(2), "load_state_dict")
    hit = data.opt_loads.get(id(opt)) if opt is not None else None
    if opt is None or hit is not None and hit.ref() is opt or len(data.opt_loads) >= 64:
        return
    rec = data.optimizers.get(id(opt))
    rec = rec if rec is not None and rec.ref() is opt else None
    data.opt_loads[id(opt)] = OptEvent(weakref.ref(opt), type(opt), seq, _shapes(opt),
                                       user_stack(), rec.steps if rec else 0, rec,
                                       lrs=loaded_lrs(opt))


def on_built(data: Any, seq: int) -> None:
    """``param.is_leaf`` read by ``add_param_group`` (caller's frame checked already)."""
    opt = _self_of(sys._getframe(2), "add_param_group", 4)
    if opt is None or len(data.opt_built) >= 256:
        return
    hit = data.opt_built.get(id(opt))
    if hit is not None and hit.ref() is opt:
        return
    before = max((r.steps for r in list(data.optimizers.values())), default=0)
    data.opt_built[id(opt)] = OptEvent(weakref.ref(opt), type(opt), seq, (), user_stack(),
                                       before=before)


def thrown_away_findings(data: Any) -> list[Finding]:
    """NOTE [loaded state thrown away]."""
    out: list[Finding] = []
    for load in list(data.opt_loads.values()):
        rec = load.rec
        if rec is None:
            rec = data.optimizers.get(id(load.ref())) if load.ref() is not None else None
            rec = rec if rec is not None and rec.ref() is load.ref() else None
        if rec is not None and rec.steps > load.steps:
            continue  # it stepped with the state it loaded
        for built in list(data.opt_built.values()):
            new = built.ref()
            brec = data.optimizers.get(id(new)) if new is not None else None
            if new is None or new is load.ref() or built.seq < load.seq or \
                    built.kind is not load.kind or brec is None or brec.ref() is not new \
                    or not brec.steps or _shapes(new) != load.shapes \
                    or id(new) in data.opt_loads:
                continue
            out.append(make("GT847", _line(built.stack, load.stack), f"the {load.kind.__name__} "
                            "state loaded earlier (its moments and step counts) went into an "
                            "optimizer that never steps: this builds a new one over the same "
                            "parameters after the load, and that one steps from an empty state",
                            fix="build the optimizer once and load the state into that one (or "
                                "load the state after building the optimizer that steps)",
                            related=[(_site(load.stack), "the state is loaded here")],
                            severity="warning"))
            break
    return out


def built_site(event: OptEvent) -> Site | None:
    """The user line that built the optimizer of ``event``."""
    return _site(event.stack)


def built_line(data: Any, rec: Any) -> Site | None:
    """Where the optimizer of step record ``rec`` was built (seen when its constructor ran),
    else the assignment before its ``step()`` line, else that line."""
    from gradtrace.runtime.trace.wiring import built_at

    opt = rec.ref()
    event = data.opt_built.get(id(opt)) if opt is not None else None
    if event is not None and event.ref() is opt:
        site = built_site(event)
        if site is not None:
            return site
    return built_at(rec.site) or rec.site


def _site(stack: Stack) -> Site | None:
    if not stack:
        return None
    _, code, line = stack[0]
    return Site(code.co_filename, line, code.co_name)


def _line(built: Stack, load: Stack) -> Site | None:
    """The built optimizer's line in the function that loaded the state, if it led to it;
    else the statement that built it."""
    if load and built:
        shared = common_line(built, load[:1])
        if shared is not None:
            return shared
    return _site(built)
