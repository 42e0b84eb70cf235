"""A value a function binds and reads only through a cut.

# NOTE [read only cut]
``d_reward = -torch.log(torch.sigmoid(self.dis(s, a))) ...`` then ``return d_reward.detach()``:
the name is bound once in the function and every read of it is the receiver of a cut
(``.detach()``, ``.item()``, ``.tolist()``, ``.numpy()``, an integer or comparison method:
cuts.py's ``CUT_METHODS``) or its ``.data``, or sits in such a receiver through arithmetic,
indexing and methods called on it (``entropy = -(p * log_p).sum(-1).detach()``). No graph leaves the function through it, so
nothing is ever backwarded through the ops of that statement: what happens to their
derivatives (an infinite one, a NaN) never reaches a gradient. A name read anywhere else
(returned as it is, stored, passed to a call, rebound) keeps the value on the graph.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import CUT_METHODS
from gradtrace.lint.nodes import child_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def read_only_cut(ctx: Context, fn: ast.AST, stmt: ast.stmt) -> bool:
    """``stmt`` binds one name of ``fn`` that ``fn`` reads only through cuts (at least one
    read): NOTE [read only cut]."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    return ctx.memo(f"read-only-cut:{name}", stmt, lambda: _only_cut(fn, stmt, name))


def _only_cut(fn: ast.AST, stmt: ast.Assign, name: str) -> bool:
    reads = 0
    for n in walk(fn):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return False
        for c in child_nodes(n):
            if not (isinstance(c, ast.Name) and c.id == name):
                continue
            if not isinstance(c.ctx, ast.Load):
                if c is not stmt.targets[0]:
                    return False  # rebound, deleted, or a loop/with target
                continue
            if not _cut_above(fn, c, n):
                return False
            reads += 1
    return reads > 0


def _cut_above(fn: ast.AST, c: ast.AST, n: ast.AST) -> bool:
    """The read ``c`` (child of ``n``) is the receiver of a cut, or sits in the receiver of
    one through arithmetic, indexing and method calls on it: ``(p * log_p).sum(-1).detach()``."""
    parents = None
    while True:
        if isinstance(n, ast.Attribute) and n.value is c:
            if n.attr == "data" or n.attr in CUT_METHODS and _called(fn, n):
                return True
            parents = parents or _parents(fn)
            call = parents.get(id(n))
            if not (isinstance(call, ast.Call) and call.func is n):
                return False
            c = call
        elif isinstance(n, (ast.BinOp, ast.UnaryOp)) or isinstance(n, ast.Subscript) \
                and n.value is c:
            c = n
        else:
            return False
        parents = parents or _parents(fn)
        n = parents.get(id(c))  # type: ignore[assignment]


def _parents(fn: ast.AST) -> dict[int, ast.AST]:
    return {id(c): n for n in walk(fn) for c in child_nodes(n)}


def _called(fn: ast.AST, attr: ast.Attribute) -> bool:
    return any(isinstance(n, ast.Call) and n.func is attr for n in walk(fn))
