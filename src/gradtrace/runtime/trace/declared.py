"""Parameters that get no gradient on purpose: the program said so (DDP's
``find_unused_parameters=True``) or calls a parent's children one by one."""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from gradtrace.runtime.trace.hooks import HookState

Tensor = torch.Tensor


def declared_unused(data: HookState) -> set[int]:
    """ids of the parameters of models wrapped in ``DistributedDataParallel(...,
    find_unused_parameters=True)``: the program declared that a forward may leave some of
    them out of the loss (an output it does not use, a branch), which DDP then handles."""
    out: set[int] = set()
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is not None and getattr(m, "find_unused_parameters", False) is True \
                and isinstance(getattr(m, "module", None), torch.nn.Module):
            out.update(id(q) for q in m.module.parameters())
    return out


def parent_idle(data: HookState, p: Tensor) -> bool:
    """Whether the module owning ``p`` sits in a parent module that never ran itself (the
    program calls the parent's children one by one, e.g. a backbone's layers without its
    original head): an unused child there was dropped on purpose, not forgotten in forward."""
    ran = {id(r.ref()) for r in list(data.modules.values())
           if r.ref() is not None and r.grad_runs + r.nograd_runs}
    for rec in list(data.modules.values()):
        root = rec.ref()
        for parent in root.modules() if root is not None else ():
            for child in parent.children():
                if any(q is p for q in child.parameters(recurse=False)):
                    return id(parent) not in ran
    return False


# NOTE [normalisation left out]
# A normalisation layer (BatchNorm, LayerNorm, GroupNorm, RMSNorm...) defined and never called
# is switched off, not forgotten: leaving its call out of forward is how code turns it off and
# keeps old checkpoints loadable (pytorch-ddpg-naf's bn1/bn2: batch norm off for RL). Without
# it every other layer still trains with its own, correct gradient; its parameters getting no
# gradient is the consequence of the choice, not a bug of the gradients. A forgotten Linear or
# Conv keeps GT820 "never ran" (examples/runtime/unused_layer.py).
NORM_LAYERS = tuple(t for t in (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm,
                                torch.nn.GroupNorm, getattr(torch.nn, "RMSNorm", None))
                    if t is not None)


def norm_left_out(data: HookState, p: Tensor) -> bool:
    """Whether ``p`` belongs to a normalisation layer (NOTE [normalisation left out])."""
    for rec in list(data.modules.values()):
        root = rec.ref()
        for m in root.modules() if root is not None else ():
            if isinstance(m, NORM_LAYERS) and any(q is p for q in m.parameters(recurse=False)):
                return True
    return False


# NOTE [read as None by the program]
# A layer defined, handed to the optimizer and never called is a known bug (forgotten in
# forward: examples/runtime/unused_layer.py, GT820 "never ran"), and a deliberate one in
# correct code (an auxiliary head kept for checkpoints, a gradient filter over every parameter:
# grokfast's gradfilter_ema guarded by `p.grad is not None`). What a run sees that separates them:
# the program's own code read that parameter's `.grad` after a backward() (other parameters had
# gradients then), got None, and went on to an optimizer step. Then the author met the missing
# gradient and let it pass; GT820 "never ran" is left out for it. A read before the backward (a
# hand-written zero_grad testing `p.grad is not None`: every gradient is None then) says
# nothing; a read by library code (clip_grad_norm_, the optimizer) is not the program's; a read
# that crashed (`p.grad.data` of None) never reaches a step and keeps GT820 next to the crash.


def note_none_read(state: Any, t: Tensor) -> None:
    """``t.grad`` read as None (``t`` a leaf that requires grad): remember the first such read
    of ``t`` by user code after a backward(), with the optimizer steps ended by then."""
    from gradtrace.runtime.frames import called_by_library

    reads = state.none_reads
    r = reads.get(id(t))
    if not state.fresh_grads or r is not None and r[0]() is t or len(reads) >= 4096 \
            or called_by_library(2):
        return
    reads[id(t)] = (weakref.ref(t), state.steps_ended)


def read_as_none(state: Any, p: Tensor) -> bool:
    """Whether user code read ``p.grad`` as None before a later optimizer step."""
    r = state.none_reads.get(id(p))
    return r is not None and r[0]() is p and state.steps_ended > r[1]
