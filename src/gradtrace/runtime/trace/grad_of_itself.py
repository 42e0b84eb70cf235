"""``autograd.grad`` asked for the gradient of a tensor with respect to itself, after an in-place
op rewrote it.

# NOTE [input rewritten into the output]
``torch.autograd.grad(F.relu_(x), (x,))`` reads as "the gradient of relu(x) with respect to
x", but an in-place op returns the tensor it wrote: the output *is* ``x``, and ``x`` now stands
for the op's result (its ``grad_fn`` is the op's node). The gradient of a tensor with respect to
itself is the grad_output (ones), not the op's derivative: 1 where the out-of-place op gives 0
for a negative entry of a ReLU. Nothing fails. The run-time fact, read when the call returns:
an input of ``autograd.grad`` is one of its outputs (the same tensor object), has a ``grad_fn``
and was written in place (its version counter moved). The line named is where that node was
made, the in-place write (GT865); the fix is the out-of-place op (or a clone before it). An
output computed from the input (``x.relu_().sum()`` against ``x`` stays silent: the sum is a
new tensor), a tensor never written in place, and a leaf are not reported.
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.trace.records import created_site, node_name

KIND = "grad-of-rewritten-input"


def _tensors(v: Any) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    return [t for t in v if isinstance(t, torch.Tensor)] if isinstance(v, (list, tuple)) else []


def rewritten_inputs(state: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                     roots: Any) -> None:
    """From an ``autograd.grad`` call that returned: note each input that is one of its outputs
    and was rewritten in place (see the NOTE)."""
    inputs = kwargs.get("inputs", args[1] if len(args) > 1 else None)
    outs = [r for r in (roots or ()) if isinstance(r, torch.Tensor)]
    for t in _tensors(inputs)[:64]:
        if t.grad_fn is None or t._version == 0 or not any(r is t for r in outs):
            continue
        site = created_site(t.grad_fn)[0]
        if site is not None:
            state.note(KIND, site, node_name(t.grad_fn).lower())


__all__ = ["KIND", "rewritten_inputs"]
