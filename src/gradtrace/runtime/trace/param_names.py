"""Names of parameters for messages, from the modules that ran (``Model.fc.weight``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from gradtrace.runtime.trace.hook_state import HookState


def param_name(data: HookState, p: Tensor) -> str:
    """``Model.fc.weight``-style name of a parameter, from the modules that ran."""
    best, depth = "", -1
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None:
            continue
        for name, q in m.named_parameters(recurse=True):
            if q is p and name.count(".") > depth:
                best, depth = f"{type(m).__name__}.{name}", name.count(".")
    if depth <= 0:
        best = _in_plain_container(data, p) or best
    return best or f"tensor of shape {list(p.shape)}"


def _in_plain_container(data: HookState, p: Tensor) -> str:
    """``MLP.blocks[0].weight`` for a layer held in a plain list/tuple/dict attribute."""
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None:
            continue
        for attr, value in vars(m).items():
            items = value.items() if isinstance(value, dict) else enumerate(value) \
                if isinstance(value, (list, tuple)) else ()
            for key, child in items:
                if isinstance(child, torch.nn.Module):
                    for name, q in child.named_parameters():
                        if q is p:
                            return f"{type(m).__name__}.{attr}[{key!r}].{name}"
    return ""
