"""Parameters that get no gradient on purpose: the program said so (DDP's
``find_unused_parameters=True``) or calls a parent's children one by one."""
from __future__ import annotations

from typing import TYPE_CHECKING

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
