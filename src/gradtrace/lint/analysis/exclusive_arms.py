"""Two statements of one function under ``if`` arms that no pass takes together.

# NOTE [arms of one flag]
``if not train and isinstance(model, DDP): forward_model = model.module`` and, further on in
the same function, ``if train: loss.backward()``: ``train`` is a name the function never binds
(a parameter, a global), so a pass that runs the backward skipped the binding, and a pass that
made the binding runs no backward. The flags are the bare-name tests (``x``, ``not x``) of the
``if`` statements around the second statement (true in the body, false in the ``else``) whose
name the function never assigns; the first statement is dead under them when an ``if`` around
it has a test that :func:`.flag_truth.truth_under` decides against its arm (``not train and
...`` is false when ``train`` is). An attribute chain (``self.hps.shared_value``, ``args.flag``)
is a flag the same way when the function stores into none of its prefixes (no
``self.hps = ...``, no ``self.hps.shared_value = ...``): PPO's ``if shared_value: v =
self.policy.value(s) else: v = self.value(s)`` then ``if not shared_value:
v_loss.backward()``. Anything else (a name bound in the function, a comparison, a call) gives
no flag: the two may run together.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.flag_arms import _dead
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def _assigned(fn: ast.AST) -> frozenset[str]:
    """The names and attribute chains ``fn`` binds in its body (its parameters are not among
    them)."""
    return frozenset(n.id if isinstance(n, ast.Name) else dotted(n) or "" for n in walk(fn)
                     if isinstance(n, (ast.Name, ast.Attribute))
                     and isinstance(n.ctx, (ast.Store, ast.Del)))


def _chain_flag(t: ast.expr, bound: frozenset[str]) -> str | None:
    """``self.hps.shared_value``: a dotted chain of attributes of which the function stores
    into no prefix (its head not rebound either)."""
    d = dotted(t) if isinstance(t, ast.Attribute) else None
    if d is None:
        return None
    parts = d.split(".")
    return None if any(".".join(parts[:i]) in bound for i in range(1, len(parts) + 1)) else d


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
            elif (chain := _chain_flag(t, bound)) is not None:
                out["$" + chain] = truth
        child, p = p, parents.get(id(p))
    return out


def apart(first: ast.AST, second: ast.AST, fn: ast.AST, ctx: Context) -> bool:
    """``first`` never runs in a pass of ``fn`` that runs ``second``
    (NOTE [arms of one flag])."""
    parents = ctx.memo("exclusive-arms-parents", fn, lambda: parent_map(fn))
    flags = _flags(second, fn, parents, ctx.memo("exclusive-arms-bound", fn,
                                                  lambda: _assigned(fn)))
    return bool(flags) and _dead(first, fn, parents, flags)
