"""Walks from a tensor to the leaves it was computed from (used by the trace state)."""
from __future__ import annotations

from typing import Any, Callable

import torch

Tensor = torch.Tensor


def upstream_leaves(t: Tensor, keep: Callable[[Tensor], None] | None = None,
                    limit: int = 4000) -> frozenset[int]:
    """ids of the leaf tensors (parameters) that ``t`` was computed from (each passed to
    ``keep`` when given)."""
    gf = t.grad_fn
    base = t._base if gf is None and t.requires_grad else None
    if base is not None and base.grad_fn is not None:  # a view taken under no_grad
        return upstream_leaves(base, keep, limit)
    if base is not None and base.requires_grad and base._base is None:
        t = base  # a view of a leaf taken under no_grad (``w[:, 0]``): the leaf itself
    if gf is None:
        if t.requires_grad:
            if keep is not None:
                keep(t)
            return frozenset((id(t),))
        return frozenset()
    out: set[int] = set()
    seen: dict[int, Any] = {}
    stack = [gf]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        var = getattr(node, "variable", None)
        if var is not None:
            out.add(id(var))
            if keep is not None:
                keep(var)
            continue
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return frozenset(out)


def converted_leaf(grad_fn: Any) -> bool:
    """Whether ``grad_fn`` is a dtype/device copy (``.to``/``.type``/``.float``/``.cuda``)
    made straight from a leaf that requires grad: the copy is what the program goes on using,
    and the leaf is what backward() fills."""
    try:
        return type(grad_fn).__name__.startswith("ToCopy") and any(
            type(f).__name__ == "AccumulateGrad" for f, _ in grad_fn.next_functions if f)
    except (AttributeError, RuntimeError):
        return False
