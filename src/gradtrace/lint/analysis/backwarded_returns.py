"""Functions that run backward on a loss and then return that same loss.

# NOTE [backwarded returns]
A training helper may call ``loss.backward()`` itself and still hand the loss back (to be
logged, or because the code around it moved): ``def train_batch(...): loss = ...;
loss.backward(); return loss``. Whoever backpropagates the returned value again (a trainer's
``loss = model.training_step(batch); loss.backward()``, or Lightning under automatic
optimization) runs through a graph the first call freed. :func:`backwarded_return` gives that
backward (without ``retain_graph``) when the function returns the very binding it
backpropagated (a name, or a dict literal's ``'loss'`` entry): that binding, made in the
backward's own block before it, reaches the ``return``, and any other binding reaching it is
``None`` (a batch skipped), so a loss returned has been backpropagated.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.reach import reaching
from gradtrace.lint.analysis.steps import Backward, step_calls
from gradtrace.lint.nodes import scope_statements

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def backwarded_return(ctx: Context, fn: Fn) -> Backward | None:
    """The backward whose loss ``fn`` returns afterwards (NOTE [backwarded returns])."""
    return ctx.memo("backwarded-return", fn, lambda: _find(ctx, fn))


def _find(ctx: Context, fn: Fn) -> Backward | None:
    sc = step_calls(ctx, fn)
    cands = [b for b in sc.losses() if isinstance(b.loss, ast.Name) and not b.retains
             and b.inputs is None]
    if not cands:
        return None
    scope = ctx.scope(fn)
    for r in ctx.memo("scope-statements", fn, lambda: scope_statements(fn)):
        if not isinstance(r, ast.Return) or r.value is None:
            continue
        name = _returned_name(r.value)
        if name is None:
            continue
        reach = reaching(scope, name, r.lineno, r)
        for b in cands:
            if b.loss.id != name or b.call.lineno >= r.lineno:  # type: ignore[union-attr]
                continue
            made = scope.binding_before(name, b.call.lineno)
            # the backwarded binding reaches the return only through the backward (bound in
            # its block, before it); any other reaching one is `None` (a skipped batch)
            if made is None or not any(x is made for x in reach) or \
                    not _same_block(made.stmt, b.stmt, fn) or not all(
                        x is made or isinstance(x.value, ast.Constant) and x.value.value is None
                        for x in reach):
                continue
            return b
    return None


def _returned_name(v: ast.expr) -> str | None:
    if isinstance(v, ast.Name):
        return v.id
    if isinstance(v, ast.Dict):
        for k, e in zip(v.keys, v.values):
            if isinstance(k, ast.Constant) and k.value == "loss" and isinstance(e, ast.Name):
                return e.id
    return None


def _same_block(a: ast.stmt, b: ast.stmt, fn: Fn) -> bool:
    """``a`` and ``b`` are statements of one block (a body, an ``else``) of ``fn``."""
    for n in (fn, *scope_statements(fn)):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and any(s is a for s in block):
                return any(s is b for s in block)
    return False
