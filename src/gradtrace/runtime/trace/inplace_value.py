"""An in-place op whose result is used as a value: a temporary meant, a kept tensor overwritten.

# NOTE [in-place result used as a value]
``denom = exp_avg_var.add_(eps).sqrt() / c`` (AdaBelief's step before its fix) and
``flat = (flat.abs_() * scale) ** p`` on ``flat = grad.reshape(n, -1)`` (ART's Lp projected
gradient descent) write in place and then use the result as an operand of an out-of-place
expression: the author wanted the value ``v + eps`` or ``|flat|`` for this one expression, and
the in-place spelling also overwrites a tensor that lives on: the optimizer's running variance
gets ``eps`` added at every step (the next step decays and reuses it), the gradient behind the
view loses its signs (the later ``grad.sign()`` is +1 everywhere). Nothing fails. The run sees
the in-place call made from a user frame; the call's source position (``co_positions`` of the
instruction at ``f_lasti``) locates it in the file's syntax tree (parsed once per file): a
method call on a name, an attribute or a subscript, whose result is an operand of an arithmetic
operator or the receiver of an out-of-place method call (a chained in-place call, a statement
of its own, an assignment or a return are not values used by an expression). What the call
overwrote must outlive the statement, by the run's facts: during a user-written optimizer's
``step`` (below), a tensor the stepping optimizer keeps in its state;
elsewhere, a view whose base tensor is a local variable of the same frame. The statement is
reported at the end (once per line). Left alone: ``exp_avg_sq.sqrt().add_(eps)``
(the receiver is a temporary), ``x.mul_(2).add_(1)`` (chained in place), ``y = x.add_(1)``
and a plain local written and used (no view, no optimizer state) are left alone.

Inside a step the run sees the calls of a user-written step only while
NOTE [NaN made by a step] hunts it (its first steps): :func:`.step_nan.step_call` hands every
call that returned its receiver (an in-place method's result is its receiver) to
:func:`note_step_write`.
"""
from __future__ import annotations

import ast
import dis
import weakref
from types import CodeType, FrameType
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.at_instruction import InstructionFacts
from gradtrace.runtime.trace.locate import tree_of

CODE = "GT901"
_OPERATORS = (ast.BinOp, ast.UnaryOp)
_RECEIVERS = (ast.Name, ast.Attribute, ast.Subscript)
_TREES: dict[str, tuple[dict[tuple[int, int, int, int], ast.Call], dict[int, ast.AST]]] = {}
_BY_STATE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SITES = 16


def note_step_write(state: Any, func: Any, target: torch.Tensor) -> None:
    """A call inside a user-written step that returned its receiver (see the NOTE):
    recorded when it wrote into a tensor the stepping optimizer keeps in its state."""
    hunt, data = state.step_hunt, getattr(state, "hooks_data", None)
    rec = data.optimizers.get(hunt.hunting) if data is not None and hunt is not None else None
    opt = rec.ref() if rec is not None else None
    if opt is not None:
        _check(state, func, target, lambda t: _in_state(opt, t))


def note_plain_write(state: Any, func: Any, target: torch.Tensor) -> None:
    """An in-place call on a tensor without grad, outside a step (see the NOTE): recorded
    when it writes through a view of a local of the calling frame."""
    if target._base is None:
        return
    _check(state, func, target, None)


def _check(state: Any, func: Any, target: torch.Tensor, kept: Any) -> None:
    frame = _user_frame()
    if frame is None:
        return
    code = frame.f_code
    text = _USES.at(code, frame.f_lasti)
    if not text or text[1] != getattr(func, "__name__", ""):
        return
    text = text[0]
    seen = _BY_STATE.setdefault(state, {})
    site = Site(code.co_filename, frame.f_lineno, code.co_name)
    if site in seen or len(seen) >= _SITES:
        return
    if kept is not None:
        what = "a tensor the optimizer keeps in its state" if kept(target) else ""
    else:
        base = target._base
        what = next((f"a view of `{n}`" for n, v in frame.f_locals.items()
                     if v is base and v is not target), "")
    if what:
        seen[site] = (text, getattr(func, "__name__", "the call"), what)


def _user_frame() -> FrameType | None:
    import sys

    f: FrameType | None = sys._getframe(1)
    for _ in range(16):
        if f is None:
            return None
        if not is_internal(f.f_code):
            return f
        f = f.f_back
    return None


def _in_state(opt: Any, t: torch.Tensor) -> bool:
    for st in list(opt.state.values()):
        if isinstance(st, dict) and any(v is t for v in st.values()):
            return True
    return False


def _value_use(code: CodeType, lasti: int) -> tuple[str, str] | tuple[()]:
    """(the receiver's source text, the method) when the call at ``lasti`` is
    ``<receiver>.<method>(...)`` used as an operand or as the receiver of an out-of-place
    method, else ``()``."""
    pos = None
    for ins in dis.get_instructions(code):
        if ins.offset > lasti:
            break
        pos = ins.positions
    if pos is None or pos.lineno is None or pos.col_offset is None:
        return ()
    calls, parents = _tree(code.co_filename)
    call = calls.get((pos.lineno, pos.col_offset, pos.end_lineno or 0, pos.end_col_offset or 0))
    if call is None or not isinstance(call.func, ast.Attribute) \
            or not isinstance(call.func.value, _RECEIVERS):
        return ()
    parent = parents.get(id(call))
    used = isinstance(parent, _OPERATORS)
    if isinstance(parent, ast.Attribute) and not parent.attr.endswith("_"):
        outer = parents.get(id(parent))
        used = isinstance(outer, ast.Call) and outer.func is parent
    return (ast.unparse(call.func.value), call.func.attr) if used else ()


_USES = InstructionFacts(_value_use)


def _tree(path: str) -> tuple[dict[tuple[int, int, int, int], ast.Call], dict[int, ast.AST]]:
    hit = _TREES.get(path)
    if hit is None:
        calls: dict[tuple[int, int, int, int], ast.Call] = {}
        parents: dict[int, ast.AST] = {}
        tree = tree_of(path)
        for node in ast.walk(tree) if tree is not None else ():
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr.endswith("_"):
                calls[(node.lineno, node.col_offset, node.end_lineno or 0,
                       node.end_col_offset or 0)] = node
        if len(_TREES) > 64:
            _TREES.clear()
        hit = _TREES[path] = (calls, parents)
    return hit


def inplace_value_findings(state: Any) -> list[Finding]:
    """NOTE [in-place result used as a value]: one finding per statement."""
    seen = _BY_STATE.pop(state, None)
    if not seen:
        return []
    from gradtrace.runtime.build import make

    return [make(
        CODE, site,
        f"`{text}.{name}()` writes into `{text}` and its result is used as a value in this "
        f"expression: `{text}` is {what}, which keeps the written values after this line, "
        "while the expression only needed them for itself",
        fix=f"use the out-of-place op (`{text}.{name.rstrip('_')}(...)`), or write into a copy",
        severity="warning") for site, (text, name, what) in seen.items()]


__all__ = ["CODE", "inplace_value_findings", "note_plain_write", "note_step_write"]
