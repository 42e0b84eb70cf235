"""Unrolled optimisation: losses chained through a tensor the loop carries (GT505)."""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Binding
from gradtrace.lint.analysis.graph_deps import Graphs, loads
from gradtrace.lint.rules.training_loop._loop import LoopFacts


def unrolled(f: LoopFacts, g: Graphs, acc: str, loop: ast.stmt) -> bool:
    """An unrolled optimisation (learning to learn, truncated BPTT): a loss backpropagated in
    ``loop`` is computed from a tensor the loop carries from one pass to the next as a function
    of itself, never made anew inside it (``x = x + update``, ``h = cell(x, h)``). The
    passes' graphs are then chained through that tensor whatever the accumulator keeps: the
    sum of the losses is the unroll's objective, and a carried hidden state that should be
    detached is GT506's finding, at the line that carries it."""
    for b in f.backwards:
        if b.loss is None or not f.inside(b.stmt, loop):
            continue
        for name in {d.name for d in g.deps(b.loss, b.stmt.lineno).bindings} - {acc}:
            inside = [e for e in f.scope.bindings.get(name, ()) if f.inside(e.stmt, loop)]
            if inside and all(_is_recurrence(e) for e in inside):
                return True
    return False


def _is_recurrence(b: Binding) -> bool:
    """``x = x + update`` / ``out, h = rnn(x, h)``: the value reads the name it binds."""
    v = b.value if not isinstance(b.stmt, ast.AugAssign) else None
    return v is not None and any(name == b.name for name, _ in loads(v))
