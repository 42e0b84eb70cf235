"""The last layer of an ``nn.Sequential()`` built empty and filled by ``add_module`` calls.

# NOTE [added layers]
``model = nn.Sequential(); model.add_module("fc", nn.Linear(64, 10));
model.add_module("softmax", nn.Softmax(dim=1))`` runs its layers in the order they were added,
so its output is what the last ``add_module`` (or ``append``) of the function that built it
gives. Read in the function (or module body) that binds the empty ``Sequential()`` to a
plain name; an ``insert``/``extend`` (or the name passed on before being filled) is not
followed: None.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import function_scopes, scope_nodes

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

ADDS = {"add_module": 1, "append": 0}


def added_last(e: ast.Call, ctx: Context) -> ast.AST | None:
    """The layer the last ``add_module``/``append`` of the name bound to ``e`` (an empty
    ``Sequential()`` call) adds, in the scope that binds it (NOTE [added layers])."""
    memo: dict[int, tuple[ast.Call, ast.AST | None]] = ctx.memo("added-layers", ctx.tree, dict)
    got = memo.get(id(e))
    if got is None or got[0] is not e:
        got = memo[id(e)] = (e, _added_last(e, ctx))
    return got[1]


def _added_last(e: ast.Call, ctx: Context) -> ast.AST | None:
    for fn in function_scopes(ctx.tree):
        nodes = list(scope_nodes(fn))
        if not any(n is e for n in nodes):
            continue
        name = next((s.targets[0].id for s in nodes if isinstance(s, ast.Assign)
                     and s.value is e and len(s.targets) == 1
                     and isinstance(s.targets[0], ast.Name)), None)
        if name is None:
            return None
        last: ast.Call | None = None
        for n in nodes:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == name:
                if n.func.attr in ("insert", "extend"):
                    return None
                if n.func.attr in ADDS and len(n.args) == ADDS[n.func.attr] + 1 and (
                        last is None or (n.lineno, n.col_offset) > (last.lineno, last.col_offset)):
                    last = n
        return last.args[-1] if last is not None else None
    return None
