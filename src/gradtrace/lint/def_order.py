"""The functions of a tree in :func:`ast.walk`'s order (breadth first), from its statements only.

A ``def`` is a statement, and statements sit only in the statement lists of other statements
(``body``, ``orelse``, ``finalbody``), of except handlers and of match cases: no expression
holds one. A breadth-first queue that follows only those fields, in each node's ``_fields``
order as ``ast.walk`` does, is ``ast.walk``'s queue with whole expression subtrees left out,
so the nodes it keeps come in the same relative order, and every ``def`` is kept. On dense
training code that is a fifth of the nodes.
"""
from __future__ import annotations

import ast

_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")
_FIELDS: dict[type, tuple[str, ...]] = {}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def breadth_first_defs(tree: ast.AST) -> list[ast.AST]:
    """The ``FunctionDef``/``AsyncFunctionDef`` nodes of ``ast.walk(tree)`` (``tree`` itself
    included when it is one), in that order."""
    todo = [tree]
    get = _FIELDS.get
    for n in todo:  # a queue: the list grows as it is read
        fs = get(n.__class__)
        if fs is None:
            fs = _FIELDS[n.__class__] = tuple(
                f for f in getattr(n.__class__, "_fields", ()) if f in _LISTS)
        for f in fs:
            v = getattr(n, f, None)
            if v:
                todo.extend(v)
    return [n for n in todo if isinstance(n, _DEFS)]
