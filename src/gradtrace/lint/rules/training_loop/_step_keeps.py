"""A training step's collection on ``self`` (GT505 outside a loop)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.graph_deps import Graphs
from gradtrace.lint.rules.training_loop._loop import LoopFacts


def step_keeps(f: LoopFacts, g: Graphs, s: ast.stmt, acc: str, value: ast.expr) -> bool:
    """``self.cost_his.append(loss)`` in a method that runs ``loss.backward()`` and
    ``optimizer.step()`` outside any loop: the method is one training step, called once per
    step, and the collection on the object (bound in no statement of this method) outlives
    every call; what it collects is the backpropagated loss itself, with its graph."""
    if not acc.startswith("self.") or isinstance(f.node, ast.Module) \
            or f.scope.bindings.get(acc) or f.scope.grad_off_at(s) is not None:
        return False
    bws = [b for b in f.backwards if b.accumulates and isinstance(b.loss, ast.Name)
           and f.before(b.stmt, s) and not f.loops_of(b.stmt)]
    if not bws or not any(f.before(b.stmt, st.stmt) for b in bws for st in f.steps):
        return False
    if not isinstance(value, ast.Name):
        return False
    got = f.scope.binding_before(value.id, s.lineno)
    return got is not None and g.carries(got) and any(
        f.scope.binding_before(b.loss.id, b.stmt.lineno) is got for b in bws)  # type: ignore
