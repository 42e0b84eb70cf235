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
them. When the next backward() starts (or the trace ends), a clipping line whose gradients no
step used while some optimizer did step with gradients is reported, with that step as context.
A clip of every parameter, a clip per optimizer before its step, and a clip followed by a
hand-written update (no optimizer step) stay silent; a step with a closure is not judged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

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
            where: Callable[[], Site | None]) -> None:
    """An optimizer steps: which clipped lines' gradients it holds."""
    c = state.clipped
    if c is None:
        return
    if closure:
        c.closure = True
        return
    held = {id(p.grad) for g in opt.param_groups for p in g["params"] if p.grad is not None}
    if not held:
        return
    missed = False
    for site, ids in c.grads.items():
        if ids & held:
            c.used.add(site)
        else:
            missed = True
    if missed and c.other is None:
        c.other = where()


def settle(state: TraceState) -> None:
    """Before the next backward() (or at the end): report the clips no step used."""
    c, state.clipped = state.clipped, None
    if c is None or c.other is None or c.closure:
        return
    for site, ids in c.grads.items():
        if ids and site not in c.used:
            state.note("clip-not-stepped", site, "clip", "",
                       ((c.other, "this optimizer.step() holds none of the clipped "
                                  "parameters"),))
