"""The file's parent map, one fact for every rule and analysis that walks up the tree.

# NOTE [one parent map]
Rules and facts that ask what holds a node (a call's statement, an attribute's call, the
``if`` around a read) walk up an ``id(child) -> parent`` map. The map of the whole file is
built once per file here (:func:`~gradtrace.lint.nodes.parent_map`) and shared; until session
51 five memo keys held five copies of that same map (built once per key), one fact rebuilt it
on every call, and the metric reads (NOTE [read only as numbers]) built one per calling
function, the module's among them: on the generated training file of ``check_scaling.py`` the
per-function maps covered 1.3x the file's nodes. A lookup in the file's map of a node inside
a function gives the same parent as that function's own map; the two differ only on the
function itself (its own map has no parent for it), which no walk up a function's map asks
past (each stops at the first statement or ``def``).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import parent_map

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def file_parents(ctx: Context) -> dict[int, ast.AST]:
    """``id(child) -> parent`` for every node of the file being checked, built once for all
    its readers (NOTE [one parent map]); read it, never change it."""
    return ctx.memo("parent-map", ctx.tree, lambda: parent_map(ctx.tree))


def enclosing_class(ctx: Context, node: ast.AST) -> ast.ClassDef | None:
    """The innermost class whose body holds ``node`` (a method, a function nested in one), as
    ``ctx.class_def`` says while the engine visits ``node``'s statements; read from the tree,
    never from the visit, so a fact asked about another function from a caller's visit (and
    memoised for the file) sees the function's own class. None for the module and for a node
    of another file."""
    if node is ctx.tree:
        return None
    info = ctx.analysis.class_of(node)  # a method: the class index, no parent map
    if info is not None:
        return info.node
    if ctx.analysis.functions.get(getattr(node, "name", "")) is node:
        return None  # a top-level function
    return ctx.memo("enclosing-class", node, lambda: _enclosing_class(ctx, node))


def _enclosing_class(ctx: Context, node: ast.AST) -> ast.ClassDef | None:
    parents = file_parents(ctx)
    up = parents.get(id(node))
    while up is not None and not isinstance(up, ast.ClassDef):
        up = parents.get(id(up))
    return up
