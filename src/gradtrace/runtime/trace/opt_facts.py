"""Facts read by the step and module hooks (an optimizer's parameters, a norm layer's state)."""
from __future__ import annotations

import weakref
from typing import Any

import torch

Tensor = torch.Tensor


def _lineage(d: Any, opt: torch.optim.Optimizer) -> int:
    """How many optimizers over the same parameters stepped before ``opt`` (its first step)."""
    params = [p for g in opt.param_groups for p in g["params"]]
    if not params:
        return 0
    first = params[0]
    hit = d.lineage.get(id(first))
    count = hit[2] if hit is not None and hit[0]() is first and hit[1] == len(params) else 0
    d.lineage[id(first)] = (weakref.ref(first), len(params), count + 1)
    return count


def _graded_other(d: Any, opt: torch.optim.Optimizer) -> frozenset[int]:
    """ids of (up to 16) parameters of modules that ran, not held by ``opt``, that have a
    gradient now."""
    mine = {id(p) for g in opt.param_groups for p in g["params"]}
    out: set[int] = set()
    for mrec in list(d.modules.values()):
        m = mrec.ref()
        for p in m._parameters.values() if m is not None else ():
            if p is not None and p.grad is not None and id(p) not in mine:
                out.add(id(p))
                if len(out) >= 16:
                    return frozenset(out)
    return frozenset(out)


def _wiped(opt: torch.optim.Optimizer, ids: set[int]) -> bool:
    """Whether a gradient of ``opt``'s parameters was among those cleared (``ids``)."""
    return any(id(p) in ids or (p.grad is not None and id(p.grad) in ids)
               for g in opt.param_groups for p in g["params"])


def _all_zero(grads: list[Tensor]) -> bool:
    """No gradient left, or only all-zero ones (``zero_grad(set_to_none=False)``)."""
    with torch.no_grad():
        return all(not g.is_sparse and not bool(g.any()) for g in grads)


def _applied(opt: torch.optim.Optimizer) -> dict[int, list[Any]]:
    """id(grad) -> (weak reference, version) of every gradient ``opt``'s step just applied
    (NOTE [cleared gradients already used by a step] in loop_order.py)."""
    out = {}
    for group in opt.param_groups:
        for p in group["params"]:
            g = p.grad
            if g is not None and not g.is_inference():  # (no version counter)
                out[id(g)] = [weakref.ref(g), g._version]
    return out


def _checksums(opt: torch.optim.Optimizer) -> list[tuple[float, float]]:
    """(sum, sum of squares) in float64 of each parameter that has a gradient."""
    out = []
    with torch.no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None and p.is_floating_point():
                    v = p.detach().double()
                    out.append((float(v.sum()), float((v * v).sum())))
    return out


def frozen_stats(m: torch.nn.Module) -> int:
    """A norm layer that keeps running statistics and whose affine parameters all have
    requires_grad=False (read at a forward in train mode with grad on): 0 if not, 2 when its
    statistics were not at their initial values then (loaded, pretrained: see
    NOTE [probe statistics]), else 1. See NOTE [moving statistics]."""
    ps = [p for p in m._parameters.values() if p is not None]
    if not (ps and getattr(m, "track_running_stats", False)
            and getattr(m, "running_mean", None) is not None
            and not any(p.requires_grad for p in ps)):
        return 0
    with torch._C.DisableTorchFunction():  # not the program's ops
        mean, var = m.running_mean, m.running_var
        fresh = var is not None and not bool(mean.any()) and bool((var == 1).all())
    return 1 if fresh else 2


def _due(step: int) -> bool:
    """Check gradients on steps 1-4, then on every power of two and every 64th step."""
    return step <= 4 or (step & (step - 1)) == 0 or step % 64 == 0
