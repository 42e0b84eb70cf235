"""Gradients clipped that the next optimizer step does not use: the clip names another
model's parameters.

# NOTE [clip of parameters no step uses]
``clip_grad_norm_(params, max_norm)`` limits the gradients of ``params`` only. A program with
two models or two heads (actor and critic, generator and discriminator) that clips one head's
parameters right before stepping the other's optimizer clips nothing the update reads: the
stepped gradients are never limited, and nothing fails.

Between a backward() and the next step the tracer notes, per clipping line, which gradient
tensors the clip multiplied (or clamped) in place: ids only, no tensor is kept. At each
optimizer step it checks whether the optimizer holds a parameter whose gradient is one of
them, and, when it holds none, whether another optimizer seen stepping before does (the clip
was meant for that one). When the next backward() starts (or the trace ends), a clipping line
whose gradients no step used while another optimizer holds them is reported, with the step that
did not use them as context. A clip of every parameter, a clip per optimizer before its step,
and a clip of parameters no optimizer holds (a hand-written update) stay silent; a step with a
closure is not judged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable

import torch

from gradtrace.runtime.frames import Site

if TYPE_CHECKING:
    from gradtrace.runtime.trace.state import TraceState

_MAX_IDS = 100_000


@dataclass
class Clipped:
    """The clips since the last backward(): line -> ids of the gradients they changed."""

    grads: dict[Site, set[int]] = field(default_factory=dict)
    used: set[Site] = field(default_factory=set)  # lines whose gradients a step held
    other: Site | None = None  # a step whose optimizer held none of a line's gradients
    owned: set[Site] = field(default_factory=set)  # lines whose gradients another one holds
    closure: bool = False


def note_clipped(state: TraceState, site: Site, target: Any) -> None:
    """The clip at ``site`` changed ``target`` (a gradient or a list of them) in place."""
    c = state.clipped
    if c is None:
        c = state.clipped = Clipped()
    ids = c.grads.setdefault(site, set())
    if isinstance(target, torch.Tensor):
        ids.add(id(target))
    elif isinstance(target, (list, tuple)) and len(ids) + len(target) < _MAX_IDS:
        ids.update(id(t) for t in target if isinstance(t, torch.Tensor))


def on_step(state: TraceState, opt: torch.optim.Optimizer, closure: bool,
            where: Callable[[], Site | None], records: Iterable[Any]) -> None:
    """An optimizer steps: which clipped lines' gradients it holds; for those it does not,
    whether another optimizer seen stepping (``records``: their weak references) holds them."""
    c = state.clipped
    if c is None:
        return
    if closure:
        c.closure = True
        return
    held = _grads_of(opt)
    if not held:
        return
    for site, ids in c.grads.items():
        if ids & held:
            c.used.add(site)
        elif site not in c.owned:
            for r in list(records):
                other = r.ref()
                if other is not None and other is not opt and ids & _grads_of(other):
                    c.owned.add(site)
                    if c.other is None:
                        c.other = where()
                    break


def _grads_of(opt: torch.optim.Optimizer) -> set[int]:
    return {id(p.grad) for g in opt.param_groups for p in g["params"] if p.grad is not None}


def settle(state: TraceState) -> None:
    """Before the next backward() (or at the end): report the clips no step used."""
    c, state.clipped = state.clipped, None
    if c is None or c.other is None or c.closure:
        return
    for site, ids in c.grads.items():
        if ids and site not in c.used and site in c.owned:
            state.note("clip-not-stepped", site, "clip", "",
                       ((c.other, "this optimizer.step() holds none of the clipped "
                                  "parameters"),))
