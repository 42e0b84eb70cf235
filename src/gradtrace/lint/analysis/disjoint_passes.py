"""Two gradient passes that each run only the nodes on the paths to their own inputs.

# NOTE [passes over separate inputs]
MAML's inner step (few-shot rumor detection): ``loss = F.cross_entropy(head_a(feat), y) +
eta * F.cross_entropy(head_b(feat), t)``, then ``torch.autograd.grad(loss,
head_a.parameters())`` without ``retain_graph`` and ``torch.autograd.grad(loss,
head_b.parameters())``. Each pass runs only the nodes on the paths from the loss to its
inputs (NOTE [grad inputs]): the first frees ``head_a``'s nodes, the second needs only
``head_b``'s and the additions above both, which save no tensor: it runs (checked on 2.13).
A value the first pass frees breaks the second only when the second runs its nodes too
(:func:`needed_by`), and the loss's own sum breaks nothing when each of its terms runs for
at most one of the two passes (:func:`separate_terms`). ``feat = encoder(x)`` under both heads
with ``inputs=encoder.parameters()`` first does run both heads' nodes: reported as before.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_inputs import parameters_of, reads_module
from gradtrace.lint.analysis.reach import reaching, value_of

if TYPE_CHECKING:
    from gradtrace.lint.analysis.graph_deps import Graphs
    from gradtrace.lint.analysis.steps import Backward
    from gradtrace.lint.flow import Binding


def needed_by(g: Graphs, bw: Backward, t: Binding) -> bool:
    """Whether the pass ``bw`` runs the nodes of ``t`` (every pass without ``inputs`` does)."""
    return g.freed_by(bw, t)


def separate_terms(g: Graphs, t: Binding, b1: Backward, b2: Backward) -> bool:
    """``t`` is a sum of terms each run by at most one of two passes with ``inputs``."""
    if b1.inputs is None or b2.inputs is None:
        return False
    terms = _terms(value_of(t))
    if len(terms) < 2:
        return False
    return not any(_runs(g, b1, e, t.line) and _runs(g, b2, e, t.line) for e in terms)


def _terms(e: ast.AST | None) -> list[ast.expr]:
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _terms(e.left) + _terms(e.right)
    return [e] if isinstance(e, ast.expr) else []


def _runs(g: Graphs, bw: Backward, e: ast.expr, line: int) -> bool:
    """Whether ``bw`` may run a node of the term ``e`` (True when its inputs are unknown)."""
    deps = g.deps(e, line).bindings
    owner = parameters_of(bw.inputs)  # type: ignore[arg-type]
    if owner is not None:
        return reads_module([e, *(value_of(x) for x in deps)], owner)
    names = bw.inputs.elts if isinstance(bw.inputs, (ast.Tuple, ast.List)) else [bw.inputs]
    if not all(isinstance(n, ast.Name) for n in names):
        return True
    at = bw.stmt.lineno if bw.stmt is not None else bw.call.lineno
    inputs = {id(x) for n in names for x in reaching(g.scope, n.id, at, prefix=True)}  # type: ignore[attr-defined]
    return any(id(d) in inputs for d in deps)
