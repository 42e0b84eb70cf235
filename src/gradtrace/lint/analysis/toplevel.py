"""Module-level names read by the file's functions.

# NOTE [module constants]
A function that reads a name it does not bind reads the module's binding of it (when the
function is defined at the top of the file or in a class there: no enclosing function binds
it). ``W_target = torch.randn(4, 1) * 5`` at module level is then as dead inside ``f(x)`` as it
is at the top: no graph. Said only when no function declares the name ``global`` (rebinding it
at run time) and every module-level binding of it is a plain assignment.
"""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context


def module_level_functions(ctx: Context) -> frozenset[int]:
    """ids of the functions defined at the top of the file or in its top-level classes."""
    def make() -> frozenset[int]:
        out = []
        for s in ctx.tree.body:  # type: ignore[attr-defined]
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(id(s))
            elif isinstance(s, ast.ClassDef):
                out.extend(id(m) for m in s.body
                           if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))
        return frozenset(out)
    return ctx.memo("module-level-functions", ctx.tree, make)


def declared_global(ctx: Context) -> frozenset[str]:
    """Names some function of the file declares ``global`` or ``nonlocal``."""
    def make() -> frozenset[str]:
        return frozenset(n for s in ast.walk(ctx.tree) if isinstance(s, (ast.Global, ast.Nonlocal))
                         for n in s.names)
    return ctx.memo("declared-global", ctx.tree, make)
