"""Where each statement of one function sits, indexed once per function and shared.

A statement's *path* is the chain of (enclosing statement or function, block field, index)
from the function down to it (NOTE [statement order]). The tracers ask two questions of it:
does a binding *dominate* a use (:meth:`StatementPaths.dominates`: every path to the use went
through the binding's block), and may an earlier binding still reach past a later one
(:meth:`StatementPaths.may_bypass`: other branch of an ``if``/``try``, or the later one sits
in a branch or loop). Nested functions and classes are not entered.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding

Path = tuple[tuple[int, str, int], ...]
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
BRANCHES = (ast.If, ast.Try)
BRANCHES_OR_LOOPS = (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While)


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

    def may_bypass(self, a: ast.stmt, b: ast.stmt) -> bool:
        """Whether the binding at ``a`` may still reach a use after the later binding at
        ``b``: they sit in different branches of one ``if``/``try``, or ``b`` is inside a
        branch or loop that does not contain ``a``."""
        sa, fa = self._down_to(a)
        sb, fb = self._down_to(b)
        k = 0
        while k < min(len(sa), len(sb)) and sa[k] is sb[k]:
            k += 1
        if k and fa[k - 1] != fb[k - 1]:
            return isinstance(sa[k - 1], BRANCHES)
        return any(isinstance(st, BRANCHES_OR_LOOPS) for st in sb[k:-1])

    def _down_to(self, s: ast.stmt) -> tuple[list[ast.stmt], list[str]]:
        """The statements from the function down to ``s`` (itself last), with the field of
        each that holds the next one (empty when ``s`` is not in the function)."""
        p = self.paths.get(id(s))
        if p is None:
            return [], []
        return ([self._stmts[pid] for pid, _, _ in p[1:]] + [s],
                [f for _, f, _ in p[1:]] + [""])


def statement_paths(ctx: Context, node: ast.AST) -> StatementPaths:
    """The (cached) :class:`StatementPaths` of the function or module ``node``."""
    return ctx.memo("statement-paths", node, lambda: StatementPaths(node))
