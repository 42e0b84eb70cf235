"""The call that hands a value computed before ``optimizer.step()`` to a function using it.

# NOTE [stale value handed to a callee]
SRGAN computes ``fake_out = netD(fake_img).mean()`` for the discriminator's loss, steps netD,
then builds the generator's loss with ``generator_criterion(fake_out, fake_img, real_img)``:
the loss module's ``forward`` reads ``out_labels`` (its parameter), the first traced op after
the step that consumes the stale value, and ``g_loss.backward()`` fails on netD's changed
weights. The loss module is right to use what it is given; the line a maintainer changes is
the call that handed it the value computed before the step (compute it again there). Read
from what ran: the consumer sits in another function than the failing ``backward()``; in the
live frame that runs that ``backward()``, the last call before it whose callee (a function, a
method or a module's ``forward``, resolved from the frame) is the consumer's function, and
that passes a tensor whose node was made before the step (its recorded sequence number), is
named. A consumer in the backward's own function, or a call passing only fresh values, keeps
the consumer's line.
"""
from __future__ import annotations

import ast
import sys
import types
from typing import Any

from gradtrace.runtime.frames import Site, is_internal


def _live_frame(site: Site) -> types.FrameType | None:
    f: types.FrameType | None = sys._getframe(1)
    while f is not None:
        if not is_internal(f.f_code) and f.f_code.co_filename == site.path \
                and f.f_lineno == site.line:
            return f
        f = f.f_back
    return None


def _resolve(expr: ast.expr, frame: types.FrameType) -> Any:
    """The object ``expr`` (a name or a dotted attribute of one) names in ``frame``."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    missing = object()
    obj = frame.f_locals.get(expr.id, frame.f_globals.get(expr.id, missing))
    for name in reversed(parts):
        if obj is missing:
            return None
        try:
            obj = getattr(obj, name, missing)
        except Exception:  # noqa: BLE001 - a property that raises: not resolvable
            return None
    return None if obj is missing else obj


def _code_of(obj: Any) -> types.CodeType | None:
    import torch

    if isinstance(obj, torch.nn.Module):
        obj = getattr(type(obj), "forward", None)
    obj = getattr(obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


def _runs(code: types.CodeType, fn: ast.FunctionDef | ast.AsyncFunctionDef, path: str) -> bool:
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    return code.co_filename == path and code.co_name == fn.name and code.co_firstlineno == first


def _stale_argument(call: ast.Call, frame: types.FrameType, step_seq: int) -> str | None:
    import torch

    from gradtrace.runtime.trace.records import created_site

    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if not isinstance(arg, ast.Name):
            continue
        value = frame.f_locals.get(arg.id)
        if isinstance(value, torch.Tensor) and value.grad_fn is not None:
            made, seq = created_site(value.grad_fn)
            if made is not None and 0 <= seq < step_seq:
                return arg.id
    return None


def caller_handing_stale(consumer: Site, site: Site | None,
                         step_seq: int) -> tuple[Site, str] | None:
    """The call, and the name of the stale argument it passes, else None.
    NOTE [stale value handed to a callee]"""
    from gradtrace.runtime.trace.locate import function_at

    if site is None or step_seq < 0:
        return None
    inner, outer = function_at(consumer), function_at(site)
    if inner is None or outer is None or inner[1] is outer[1] \
            or not isinstance(inner[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    frame = _live_frame(site)
    if frame is None:
        return None
    calls = []
    stack = list(ast.iter_child_nodes(outer[1]))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Call) and node.lineno < site.line:
            calls.append(node)
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        code = _code_of(_resolve(call.func, frame))
        if code is None or not _runs(code, inner[1], consumer.path):
            continue
        name = _stale_argument(call, frame, step_seq)
        if name is not None:
            return Site(site.path, call.lineno, site.function, call.col_offset), name
        return None  # the last call of the consumer's function passes only fresh values
    return None
