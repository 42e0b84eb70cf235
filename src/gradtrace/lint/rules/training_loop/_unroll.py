"""Unrolled optimisation: losses chained through a tensor the loop carries (GT505)."""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Binding
from gradtrace.lint.analysis.graph_deps import Graphs, loads
from gradtrace.lint.rules.training_loop._loop import LoopFacts
from gradtrace.lint.rules.training_loop.carried import _detaching_helper

CUTS = frozenset({"detach", "detach_", "data", "item", "tolist", "numpy"})


def unrolled(f: LoopFacts, g: Graphs, acc: str, loop: ast.stmt) -> bool:
    """An unrolled optimisation (learning to learn, BPTT over a whole run): a loss backpropagated in
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
            if inside and all(_is_recurrence(e) and not _cut(e, f) for e in inside):
                return True
    return False


def _cut(b: Binding, f: LoopFacts) -> bool:
    """``h = h.detach()``, ``h = repackage_hidden(h)``: the carried value leaves the graph on
    every pass (truncated BPTT), so the passes' graphs are not chained through it."""
    v = b.value
    return v is not None and (_detaching_helper(v, f.ctx) or any(
        isinstance(n, ast.Attribute) and n.attr in CUTS and _of(n.value, b.name)
        for n in ast.walk(v)))


def _of(e: ast.expr, name: str) -> bool:
    """``e`` is ``name`` itself or a chain of calls on it (``h``, ``h.clone()``), not one of
    its attributes (``theta.grad``)."""
    while True:
        if isinstance(e, ast.Name):
            return e.id == name
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            e = e.func.value
        else:
            return False


def _is_recurrence(b: Binding) -> bool:
    """``x = x + update`` / ``out, h = rnn(x, h)``: the value reads the name it binds."""
    v = b.value if not isinstance(b.stmt, ast.AugAssign) else None
    return v is not None and any(name == b.name for name, _ in loads(v))
