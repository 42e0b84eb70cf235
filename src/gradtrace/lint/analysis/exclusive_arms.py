"""Two statements of one function under ``if`` arms that no pass takes together.

# NOTE [arms of one flag]
``if not train and isinstance(model, DDP): forward_model = model.module`` and, further on in
the same function, ``if train: loss.backward()``: ``train`` is a name the function never binds
(a parameter, a global), so a pass that runs the backward skipped the binding, and a pass that
made the binding runs no backward. The flags are the bare-name tests (``x``, ``not x``) of the
``if`` statements around the second statement (true in the body, false in the ``else``) whose
name the function never assigns; the first statement is dead under them when an ``if`` around
it has a test that :func:`.flag_truth.truth_under` decides against its arm (``not train and
...`` is false when ``train`` is). Anything else (a name bound in the function, an attribute,
a comparison) gives no flag: the two may run together.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.flag_arms import _dead
from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def _assigned(fn: ast.AST) -> frozenset[str]:
    """The names ``fn`` binds in its body (its parameters are not among them)."""
    return frozenset(n.id for n in walk(fn) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, (ast.Store, ast.Del)))


def _flags(node: ast.AST, fn: ast.AST, parents: dict[int, ast.AST],
           bound: frozenset[str]) -> dict[str, object]:
    """``$name`` -> truth for each bare-name test of an ``if`` around ``node`` in ``fn``."""
    out: dict[str, object] = {}
    child, p = node, parents.get(id(node))
    while p is not None and p is not fn:
        if isinstance(p, ast.If) and child is not p.test:
            t, truth = p.test, child in p.body
            if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
                t, truth = t.operand, not truth
            if isinstance(t, ast.Name) and t.id not in bound:
                out["$" + t.id] = truth
        child, p = p, parents.get(id(p))
    return out


def apart(first: ast.AST, second: ast.AST, fn: ast.AST, ctx: Context) -> bool:
    """``first`` never runs in a pass of ``fn`` that runs ``second``
    (NOTE [arms of one flag])."""
    parents = ctx.memo("exclusive-arms-parents", fn, lambda: parent_map(fn))
    flags = _flags(second, fn, parents, ctx.memo("exclusive-arms-bound", fn,
                                                  lambda: _assigned(fn)))
    return bool(flags) and _dead(first, fn, parents, flags)
