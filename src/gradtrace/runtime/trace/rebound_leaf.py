"""Where a name whose ``.grad`` is read lost its leaf (called by ``TraceState.on_nonleaf_grad``)."""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.runtime.frames import Site


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def rebound_leaf(grad_fn: Any, made: Site, read: Site) -> bool:
    """``b = torch.tensor(..., requires_grad=True).view(3, 1)``, ``lhs_pos = lhs_pos.view(...)``,
    ``a = torch.tensor(5.0, requires_grad=True) * 0.1``, then ``b.grad``: the non-leaf whose
    ``.grad`` is read was computed straight from a plain tensor made to require grad (not a
    Parameter), and the statement that computed it binds the very name read. The name lost its
    leaf there (GT305's line), not at the read.

    # NOTE [leaf rebound by its own statement]
    A module's output (``out = model(x)``, its inputs are Parameters) or a value read through a
    subscript (``info["means2D"].grad``) keeps the read's line: there the fix is
    ``retain_grad()``, not a leaf kept under its name."""
    from torch import nn

    from gradtrace.runtime.trace.locate import tree_of

    try:
        plain = any(type(f).__name__ == "AccumulateGrad" and not isinstance(
            f.variable, nn.Parameter) for f, _ in grad_fn.next_functions if f is not None)
    except (AttributeError, RuntimeError):
        return False
    tree = tree_of(read.path) if plain else None
    read_names = {_last_name(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                  and n.attr == "grad" and n.lineno == read.line} if tree is not None else set()
    made_tree = tree_of(made.path) if read_names - {None} else None
    for node in ast.walk(made_tree) if made_tree is not None else ():
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno <= made.line <= (
                node.end_lineno or node.lineno):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if {_last_name(t) for t in targets} & (read_names - {None}):
                return True
    return False
