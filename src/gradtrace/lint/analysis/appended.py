"""What an empty container of blocks holds when the code fills it by ``append`` calls.

``self.levels = nn.ModuleList()`` then ``self.levels.append(conv_relu(c))`` in a loop of
``__init__`` holds those blocks (NOTE [module results] reads them as a literal's elements).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def appended_blocks(e: ast.Call, ctx: Context, where: ast.AST | None) -> list[ast.AST]:
    """The ``append`` arguments on the name or ``self`` attribute the empty container ``e`` is
    assigned to, in the same function, when they build one kind of block (the same
    constructor or helper); [] when it is changed any other way there."""
    fn = where or ctx.tree
    target = next((dotted(n.targets[0]) for n in walk(fn) if isinstance(n, ast.Assign)
                   and n.value is e and len(n.targets) == 1), None)
    if target is None:
        return []
    out: list[ast.AST] = []
    for n in walk(fn):
        if isinstance(n, (ast.AugAssign, ast.Assign)) and n.lineno > e.lineno and any(
                dotted(t.value if isinstance(t, ast.Subscript) else t) == target
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
            return []  # `self.levels += [...]`, `self.levels[0] = ...`, a new container
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == target:
            if n.func.attr != "append" or len(n.args) != 1:
                return []  # extend/insert: not followed
            out.append(n.args[0])
    kinds = {dotted(a.func) if isinstance(a, ast.Call) else None for a in out}
    return out if len(kinds) == 1 and None not in kinds else []  # one kind of block only:
    # a list of mixed layers (convs, then a ReLU) is walked by code that tells them apart
