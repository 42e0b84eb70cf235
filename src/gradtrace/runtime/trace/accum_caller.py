"""The caller that hands a loss to a helper keeping a running total of it.

# NOTE [running total in a helper]
``total += loss`` after a backward() keeps every step's graph (GT505). When the ``+=`` runs in
a helper that was *given* the tensor (an average meter's ``update(val, n)``, a logger's
``push(v)``, ``accumulate(logs, key, value)``), the helper is generic: it sums whatever it
receives, and the line to change is the call that passes a tensor with its graph where a
number was meant (``meter.update(loss.item())``). Run-time facts: the frame running the ``+=``
has an argument that is a tensor with a graph, whose ``grad_fn`` the added term reaches within
a few nodes; the line named is then the user frame that called that function.
"""
from __future__ import annotations

import sys
from typing import Any

from gradtrace.runtime.frames import Site, is_internal


def _near(after: Any, target: Any, depth: int = 4) -> bool:
    level = [after]
    for _ in range(depth):
        nxt = []
        for n in level:
            try:
                for m, _ in n.next_functions:
                    if m is target:
                        return True
                    if m is not None:
                        nxt.append(m)
            except (AttributeError, RuntimeError):
                continue
        level = nxt
    return False


def caller_of_argument(code: Any, after: Any) -> Site | None:
    """The call of the function running ``code`` (the frame of the ``+=``) when the added term
    comes from one of its tensor arguments (NOTE [running total in a helper]), else None."""
    import torch

    f = sys._getframe(1)
    while f is not None and f.f_code is not code:
        f = f.f_back
    if f is None or after is None:
        return None
    n = code.co_argcount + code.co_kwonlyargcount
    args = [f.f_locals.get(name) for name in code.co_varnames[:n]]
    if not any(isinstance(a, torch.Tensor) and a.grad_fn is not None
               and _near(after, a.grad_fn) for a in args):
        return None
    up = f.f_back
    while up is not None and is_internal(up.f_code):
        up = up.f_back
    return None if up is None else Site(up.f_code.co_filename, up.f_lineno, up.f_code.co_name)


__all__ = ["caller_of_argument"]
