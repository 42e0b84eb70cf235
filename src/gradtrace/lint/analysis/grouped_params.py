"""Which ``.parameters()`` calls an optimizer's arguments read, through the names of the
function that builds it.

# NOTE [grouped parameters]
An optimizer is often given parameter groups built a few lines before it rather than
``model.parameters()`` itself: ``table = {n: p for n, p in self.named_parameters()}``,
``groups = [{"params": [p for n, p in table.items() if p.dim() >= 2]}, {"params": ...,
"weight_decay": 0.0}]``, ``AdamW(groups, lr=lr)`` (the weight-decay split of GPT-style and
fine-tuning code). Filtered or not, some of the module's parameters are in the optimizer:
the module is trained. :func:`param_calls` gives the ``.parameters()`` /
``.named_parameters()`` calls an optimizer call reads, in its arguments or in the values
assigned, in the same function (or at module level for a script), to the names those
arguments read, ``MAX_HOPS`` names deep. Which parameters exactly is not decided here
(``params.param_sources_of`` answers that for plain lists).
"""
from __future__ import annotations

import ast

from gradtrace.lint.nodes import child_nodes

PARAM_CALLS = ("parameters", "named_parameters")
MAX_HOPS = 4
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _assigned(fn: ast.AST) -> dict[str, list[ast.expr]]:
    """Name -> the values assigned to it in ``fn``'s own body (nested scopes left out)."""
    out: dict[str, list[ast.expr]] = {}
    stack = list(child_nodes(fn))
    while stack:
        n = stack.pop()
        if isinstance(n, SCOPES):
            continue
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(n.value)
        stack.extend(child_nodes(n))
    return out


def param_calls(call: ast.Call, fn: ast.AST) -> list[ast.Call]:
    """NOTE [grouped parameters]: the parameter calls ``call`` (an optimizer's construction
    in ``fn``) reads, directly or through names assigned in ``fn``."""
    out: list[ast.Call] = []
    values = None
    seen: set[str] = set()
    todo: list[ast.AST] = [*call.args, *(k.value for k in call.keywords)]
    for _ in range(MAX_HOPS + 1):
        names: list[str] = []
        for e in todo:
            for n in ast.walk(e):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr in PARAM_CALLS:
                    out.append(n)
                elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) \
                        and n.id not in seen:
                    seen.add(n.id)
                    names.append(n.id)
        if not names:
            break
        if values is None:
            values = _assigned(fn)
        todo = [v for name in names for v in values.get(name, ())]
    return out
