"""Lists the code reads only element by element: a table of parts, not a list of groups.

# NOTE [list read by index]
An optimizer takes its parameter groups as one list: ``SGD(groups)``, ``SGD(self.groups)``.
A list the code stores and then reads only through a subscript (``self.stages[i]``,
``chain(*[self.stages[i] for i in range(depth)])``) is a table whose elements are taken one
at a time: a continual-learning ResNet's per-stage ``parameters()`` iterators, of which the
first ``latent_depth`` are frozen. Such a list is not handed whole to an optimizer, so what it
leaves out is not missing from any group.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def read_by_index(ctx: Context, stmt: ast.AST | None) -> bool:
    """``stmt`` binds one name or ``self`` attribute whose every read in the file (one at
    least) is the value of a subscript (NOTE [list read by index])."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return False
    name = dotted(stmt.targets[0])
    if name is None or "." in name and not (name.startswith("self.") and name.count(".") == 1):
        return False
    parents = ctx.memo("indexed-parents", ctx.tree, lambda: {
        id(c): p for p in ast.walk(ctx.tree) for c in ast.iter_child_nodes(p)})
    reads = [n for n in ast.walk(ctx.tree) if isinstance(n, (ast.Name, ast.Attribute))
             and isinstance(n.ctx, ast.Load) and dotted(n) == name]
    return bool(reads) and all(
        isinstance(p := parents.get(id(n)), ast.Subscript) and p.value is n for n in reads)
