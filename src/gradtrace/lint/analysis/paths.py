"""Where each statement of one function sits, indexed once per function and shared.

A statement's *path* is the chain of (enclosing statement or function, block field, index)
from the function down to it (NOTE [statement order]). The tracers ask which bindings of a
name may reach a use (:meth:`StatementPaths.reaching`: the last one whose block encloses the
use, and every later one); the GT5 loop facts order statements by it. Nested functions and
classes are not entered.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding

Path = tuple[tuple[int, str, int], ...]
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class StatementPaths:
    """The paths of one function's statements (see the module docstring)."""

    def __init__(self, node: ast.AST) -> None:
        self.paths: dict[int, Path] = {}
        self.blocks: dict[tuple[int, str], list[ast.stmt]] = {}
        self._stmts: dict[int, ast.stmt] = {}
        self._enclosing: dict[int, tuple[tuple[int, str], ...]] = {}
        self._index(getattr(node, "body", []), (), (id(node), "body"))

    def _index(self, body: list[ast.stmt], path: Path, key: tuple[int, str]) -> None:
        self.blocks[key] = body
        for i, s in enumerate(body):
            p = path + ((key[0], key[1], i),)
            self.paths[id(s)] = p
            self._stmts[id(s)] = s
            if isinstance(s, DEFS):
                continue
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(s, field, None)
                if sub and isinstance(sub, list) and isinstance(sub[0], ast.stmt):
                    self._index(sub, p, (id(s), field))
            for j, h in enumerate(getattr(s, "handlers", ())):
                self._index(h.body, p, (id(s), f"handlers{j}"))
            for j, c in enumerate(getattr(s, "cases", ())):
                self._index(c.body, p, (id(s), f"cases{j}"))

    def _blocks_of(self, s: ast.stmt) -> tuple[tuple[int, str], ...]:
        """The blocks enclosing ``s`` below the function, ``with`` bodies left out (a ``with``
        body always runs)."""
        hit = self._enclosing.get(id(s))
        if hit is None:
            hit = self._enclosing[id(s)] = tuple(
                (pid, f) for pid, f, _ in self.paths.get(id(s), ())[1:]
                if not isinstance(self._stmts.get(pid), (ast.With, ast.AsyncWith)))
        return hit

    def dominates(self, b: ast.stmt, use: ast.stmt | None) -> bool:
        """``b`` sits in a block that encloses ``use`` (None: the end of the function)."""
        if use is None:
            return True
        pb = self._blocks_of(b)
        return self._blocks_of(use)[:len(pb)] == pb

    def reaching(self, earlier: list[Binding], use: ast.stmt | None) -> list[Binding]:
        """Of a name's ``earlier`` bindings (in source order), those that may reach ``use``:
        the last one that dominates it and every later one (each may have run last)."""
        out: list[Binding] = []
        for b in reversed(earlier):
            out.append(b)
            if self.dominates(b.stmt, use):
                break
        return out


def statement_paths(ctx: Context, node: ast.AST) -> StatementPaths:
    """The (cached) :class:`StatementPaths` of the function or module ``node``."""
    return ctx.memo("statement-paths", node, lambda: StatementPaths(node))


def place(ctx: Context, node: ast.AST, s: ast.stmt
          ) -> tuple[tuple[int, str, int], list[ast.stmt]] | None:
    """The last step of the path of ``s`` in :func:`statement_paths` of ``node`` (the
    statement or ``node`` holding its block, the block's field, its index there) and that
    block; None when ``s`` has no path there (a class body lies between). For the statement
    being visited (``ctx.statement``) it is read from the visit's enclosing statements, without
    indexing ``node``: most functions are asked about one or two statements."""
    chain = ctx.stmts
    if not chain or chain[-1] is not s:
        index = statement_paths(ctx, node)
        path = index.paths.get(id(s))
        return (path[-1], index.blocks.get(path[-1][:2], [])) if path else None
    start = 0
    if node is not ctx.tree:
        start = next((k + 1 for k in range(len(chain) - 2, -1, -1) if chain[k] is node), -1)
        if start < 0:
            return None  # (``node`` does not enclose ``s``: no path)
    inner = chain[start:-1]
    if any(isinstance(x, DEFS) for x in inner):
        return None  # nested classes (and functions) are not entered
    parent = inner[-1] if inner else node
    if isinstance(parent, (ast.ExceptHandler, ast.match_case)):
        holder = inner[-2] if len(inner) >= 2 else node
        field = "handlers" if isinstance(parent, ast.ExceptHandler) else "cases"
        j = next(j for j, h in enumerate(getattr(holder, field)) if h is parent)
        block = parent.body
        key = (id(holder), f"{field}{j}")
    else:
        fields = ("body",) if parent is node else ("body", "orelse", "finalbody")
        got = next(((f, sub) for f in fields if (sub := getattr(parent, f, None))
                    and isinstance(sub, list) and any(x is s for x in sub)), None)
        if got is None:
            return None
        key, block = (id(parent), got[0]), got[1]
    i = next(i for i, x in enumerate(block) if x is s)
    return (key[0], key[1], i), block
