"""GT505 across a call: a training step hands back the loss it backpropagated, and the loop
that calls it sums (or collects) the returned value.

# NOTE [backpropagated loss handed back]
``def training_step(self, model, inputs): loss = ...; loss.backward(); return loss`` (NOTE
[backwarded returns]) gives its caller the loss with its graph: ``backward()`` frees the saved
tensors, not the graph's nodes, which stay reachable from the returned tensor. A caller loop
``tr_loss += self.training_step(model, inputs)`` (or ``losses.append(...)``, or ``out = ...``
then ``tr_loss += out``) into an accumulator that outlives the loop chains every step's graph
into one that is never freed: memory grows with every step (transformers' Trainer, fixed by
``return loss.detach()``). The place to cut is the ``return``: whatever each caller does, the
step has no use for the graph any more. The finding lands on the ``return``; the caller's
accumulation is its related place. A caller that takes ``.item()``/``.detach()``/``float()``
of the result, or that backpropagates the accumulated sum (GT535's business), is left alone.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.backwarded_returns import backwarded_return
from gradtrace.lint.analysis.accumulators import _uncut_names
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.analysis.update_helpers import node_code
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import scope_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.rules.training_loop._loop import LoopFacts


def returners(ctx: Context) -> frozenset[str]:
    """Names of the file's functions that return the loss they backpropagated."""
    def make() -> frozenset[str]:
        if not ctx.mentions(".backward(") or not ctx.mentions("return "):
            return frozenset()
        out: set[str] = set()
        for n in walk(ctx.tree):
            if isinstance(n, FUNCTION_TYPES) and n.name not in out:
                code = node_code(ctx, n)
                if ".backward(" in code and "return " in code and backwarded_return(ctx, n):
                    out.add(n.name)
        return frozenset(out)
    return ctx.memo("gt505-returners", ctx.tree, make)


def calls_returner(ctx: Context, text: str) -> bool:
    """``text`` (a function's) spells a call of a function of :func:`returners`."""
    names = returners(ctx)
    return bool(names) and any(f"{n}(" in text for n in names)


def handed_back(f: LoopFacts, s: ast.stmt, value: ast.expr, loop: ast.stmt
                ) -> tuple[ast.Return, ast.AST] | None:
    """(the ``return`` of the backpropagated loss, the function) when ``value``, accumulated by
    ``s`` in ``loop``, is (uncut) the result of a call of such a function, directly or through
    a name bound to that call in the loop (NOTE [backpropagated loss handed back])."""
    names = returners(f.ctx)
    if not names:
        return None
    calls: list[ast.Call] = []
    if isinstance(value, ast.Call):
        calls.append(value)
    elif isinstance(value, ast.BinOp):
        calls.extend(c for c in (value.left, value.right) if isinstance(c, ast.Call))
    for name in _uncut_names(value):
        b = f.scope.binding_before(name, s.lineno)
        if b is not None and f.inside(b.stmt, loop) and isinstance(b.stmt, ast.Assign) \
                and len(b.stmt.targets) == 1 and isinstance(b.stmt.targets[0], ast.Name) \
                and isinstance(b.stmt.value, ast.Call):
            calls.append(b.stmt.value)
    for call in calls:
        fn = called_function(call, f.scope, s.lineno)
        if fn is None or getattr(fn, "name", None) not in names:
            continue
        back = backwarded_return(f.ctx, fn)  # type: ignore[arg-type]
        ret = next(_returns_of(fn, back.loss.id), None) if back is not None else None  # type: ignore[union-attr]
        if ret is not None:
            return ret, fn
    return None


def _returns_of(fn: ast.AST, name: str) -> Iterator[ast.Return]:
    for r in scope_nodes(fn):
        if isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id == name:
            yield r
