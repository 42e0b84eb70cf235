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
