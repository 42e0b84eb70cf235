"""Which part of a function's return value a caller of the file backpropagates.

# NOTE [returned loss backpropagated by the caller]
A training step is often split: a helper computes the losses and hands them back
(``y_hat, loss_mel, loss_all = self.generator_losses(c, y)``), and the step backpropagates one
of them (``loss_all.backward()``, ``self.manual_backward(loss_all)``). For a ``return`` of the
helper, :func:`caller_backwarded` gives the returned expression the callers differentiate:
the element at the position of the target name a caller of the file binds the call to and
then passes to a backward (``.backward()`` on it, or a call whose name holds ``backward``
given it first, as Lightning's ``manual_backward``) in the same function (or script), after
the call.
The helper is found by name: ``fn(...)`` for a function, ``self.fn(...)`` for a method called
inside its class.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import statements_on, word_lines
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def _is_call_of(call: ast.AST, fn: Fn, method: bool) -> bool:
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    if method:
        return isinstance(f, ast.Attribute) and f.attr == fn.name \
            and isinstance(f.value, ast.Name) and f.value.id == "self"
    return isinstance(f, ast.Name) and f.id == fn.name


def _backwarded(name: str, after: int, where: ast.AST) -> bool:
    """``name`` is passed to a backward in ``where`` on a line after ``after``."""
    for n in walk(where):
        if not isinstance(n, ast.Call) or n.lineno <= after:
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr == "backward" \
                and isinstance(f.value, ast.Name) and f.value.id == name:
            return True
        attr = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if "backward" in attr and n.args and isinstance(n.args[0], ast.Name) \
                and n.args[0].id == name:
            return True
    return False


def backwarded_positions(ctx: Context, fn: Fn) -> frozenset[int | None]:
    """The positions of ``fn``'s returned tuple that a caller backpropagates (None: the whole
    value), NOTE [returned loss backpropagated by the caller]."""
    def find() -> frozenset[int | None]:
        method = ctx.analysis.class_of(fn) is not None
        out: set[int | None] = set()
        for s, outer in statements_on(ctx, word_lines(ctx, [fn.name])):
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                    and _is_call_of(s.value, fn, method)):
                continue
            caller = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)),
                          ctx.tree)  # a script's own lines call it too
            if caller is fn:
                continue
            t = s.targets[0]
            names = [(None, t)] if isinstance(t, ast.Name) else list(enumerate(t.elts)) \
                if isinstance(t, ast.Tuple) else []
            for i, e in names:
                if isinstance(e, ast.Name) and _backwarded(e.id, s.lineno, caller):
                    out.add(i)
        return frozenset(out)
    return ctx.memo("caller-backwarded", fn, find)


def caller_backwarded(ctx: Context, fn: Fn, ret: ast.Return) -> ast.expr | None:
    """The part of ``ret``'s value a caller backpropagates (None: none, or not one)."""
    if ret.value is None:
        return None
    pos = backwarded_positions(ctx, fn)
    if len(pos) != 1:
        return None
    (i,) = pos
    v = ret.value
    if i is None:
        return None if isinstance(v, ast.Tuple) else v
    return v.elts[i] if isinstance(v, ast.Tuple) and i < len(v.elts) and not any(
        isinstance(x, ast.Starred) for x in v.elts) else None
