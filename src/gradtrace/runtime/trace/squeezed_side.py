"""Which line gave a loss input its wrong shape, when torch warns that they broadcast.

# NOTE [squeezed loss input]
``preds = head.logits_to_preds(logits)`` (``logits.squeeze(-1)``: (B,)) and later
``MSELoss(reduction="none")(preds, labels)`` with labels (B, 1): torch warns "Using a target
size ... different to the input size" at the loss, but the loss line is right; the input lost
its trailing dimension where it was squeezed. When one side of the warned loss is the output of
a squeeze (its ``grad_fn``, stamped with the line that made it, NOTE [hot path]) and the other
side has more dimensions, that line is named: in the frame running the loss or one of its
callers, the squeeze itself; made in a helper that has returned (``logits_to_preds``), the
statement of the innermost calling frame that bound the squeezed tensor to a local name (the
call of the helper, where the maintainer passes the unsqueezed logits instead). Any other
shape mismatch keeps the loss line.
"""
from __future__ import annotations

import ast
import sys
import types
from typing import Any

import torch

from gradtrace.runtime.frames import Site

Tensor = torch.Tensor


def squeezed_site(frame: types.FrameType | None) -> Site | None:
    """The line to name for the squeezed side of the loss warned about at ``frame``, or None."""
    if frame is None:
        return None
    loss = _loss_frame(frame)
    if loss is None:
        return None
    a, b = loss.f_locals.get("input"), loss.f_locals.get("target")
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.dim() == b.dim():
        return None
    short = a if a.dim() < b.dim() else b
    gf = short.grad_fn
    if gf is None or not type(gf).__name__.startswith("SqueezeBackward"):
        return None
    from gradtrace.runtime.trace.records import created_site

    made, _ = created_site(gf)
    if made is None:
        return None
    f: types.FrameType | None = frame
    while f is not None:
        if f.f_code.co_filename == made.path and f.f_code.co_name == made.function:
            return made  # squeezed in a frame still running: that line
        f = f.f_back
    return bound_site(frame, short)


def bound_site(frame: types.FrameType | None, value: Any,
               skip: Any = lambda code: False) -> Site | None:
    """The statement that bound ``value``: in the first frame from ``frame`` outwards (frames
    whose code ``skip`` says are passed) holding it in a local of its own (not a parameter),
    the last assignment of that name before the frame's line."""
    f = frame
    while f is not None:
        code = f.f_code
        params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
        names = [] if skip(code) else [k for k, v in list(f.f_locals.items())
                                       if v is value and k not in params]
        if names:
            line = _bound_at(code.co_filename, code.co_firstlineno, f.f_lineno, names[0])
            return None if line is None else Site(code.co_filename, line, code.co_name)
        f = f.f_back
    return None


def _loss_frame(frame: types.FrameType) -> types.FrameType | None:
    """The library frame below the user's ``frame`` holding the loss's ``input``/``target``."""
    f: types.FrameType | None = sys._getframe(1)
    while f is not None and f is not frame:
        loc = f.f_locals
        if isinstance(loc.get("input"), Tensor) and isinstance(loc.get("target"), Tensor):
            return f
        f = f.f_back
    return None


def _bound_at(path: str, first: int, before: int, name: str) -> int | None:
    """The last line from ``first`` to ``before`` that assigns ``name`` in ``path``."""
    from gradtrace.runtime.trace.locate import tree_of

    tree: Any = tree_of(path)
    if tree is None:
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and first <= node.lineno <= before and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if best is None or node.lineno > best:
                best = node.lineno
    return best
