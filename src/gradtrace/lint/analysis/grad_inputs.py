"""What a backward pass restricted to one module's parameters runs (NOTE [grad inputs]).

``torch.autograd.grad(loss, m.parameters())`` and ``loss.backward(inputs=list(m.parameters()))``
run only the nodes on the paths from ``loss`` to ``m``'s parameters: ``m``'s nodes and those
after it. A value computed before ``m`` without reading it (the encoder's features that MAML's
inner step feeds to its learner) keeps its saved tensors.
"""
from __future__ import annotations

import ast
from typing import Iterable

from gradtrace.lint.names import dotted


def parameters_of(e: ast.expr) -> str | None:
    """``m`` for ``m.parameters()``, ``list(m.parameters())``, ``[*m.parameters()]``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in (
            "list", "tuple") and len(e.args) == 1:
        e = e.args[0]
    elif isinstance(e, (ast.List, ast.Tuple)) and len(e.elts) == 1 \
            and isinstance(e.elts[0], ast.Starred):
        e = e.elts[0].value
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "parameters" and not e.args:
        return dotted(e.func.value)
    return None


def reads_module(values: Iterable[ast.expr | None], owner: str) -> bool:
    """Some of ``values`` reads the module ``owner``: a call of it or of a part of it, a read
    of one of its weights (``x @ self.head.weight``)."""
    return any(isinstance(n, (ast.Name, ast.Attribute)) and (
        (d := dotted(n) or "") == owner or d.startswith(owner + "."))
        for e in values if e is not None for n in ast.walk(e))



def runs_on_output(ctx, fns: Iterable[ast.AST], first: str, then: str) -> bool:
    """Whether, in ``fns``, a statement that reads the module ``then`` (a call of it or of a
    part of it, a weight of it) also reads a value computed from ``first`` (through each
    function's assignments): then ``then``'s nodes may lie on the paths from a loss to
    ``first``'s parameters, and a pass with ``inputs=first.parameters()`` runs them
    (NOTE [grad inputs]). ``then`` run on data alone (3DInfomax's 2D model on the molecular
    graph, beside the 3D model on the conformers) is not on those paths. True also when no
    statement of ``fns`` reads ``then`` (it runs elsewhere: unknown)."""
    found = False
    for fn in fns:
        scope = ctx.scope(fn)
        for s in scope.stmts:
            v = getattr(s, "value", None)
            if not isinstance(v, ast.expr) or not reads_module([v], then):
                continue
            found = True
            todo, seen = [v], set()
            while todo:
                e = todo.pop()
                if reads_module([e], first):
                    return True
                for n in ast.walk(e):
                    if isinstance(n, ast.Name) and n.id not in seen:
                        seen.add(n.id)
                        todo.extend(x for b in scope.bindings.get(n.id, ())
                                    if (x := b.value if b.value is not None else getattr(
                                        b.stmt, "value", None)) is not None)
    return not found
