"""Which function (or the module) each node of a file sits in, from one iterative walk."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.nodes import child_nodes

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def owners(ctx: Context) -> dict[int, ast.AST]:
    """id of every node -> its innermost enclosing function (or the module), cached per file.
    Iterative: a deep expression must not exhaust the recursion limit."""
    def make() -> dict[int, ast.AST]:
        out: dict[int, ast.AST] = {}
        stack: list[tuple[ast.AST, ast.AST]] = [(ctx.tree, ctx.tree)]
        while stack:
            n, owner = stack.pop()
            inner = n if isinstance(n, FUNCS) else owner
            for child in child_nodes(n):
                out[id(child)] = inner
                stack.append((child, inner))
        return out
    return ctx.memo("owners", ctx.tree, make)
