"""GT210 at the grad-off block when the code it runs with grad off is the training path.

# NOTE [the training path run with grad off]
An evaluation that reuses the training code (`with torch.no_grad(): model.compute_loss(b)`,
or `torch.set_grad_enabled(False)` before `module.validation_step(b)`) runs with grad off a
function the training loop also runs, with grad on, and backpropagates: that function is
right as it is (training works), and what breaks it is the block that turned grad off around
it. So when the call that hands the work to the gradient helper
(NOTE [gradient reached through the callee]) stands in a function that some other function of the file calls outside
any grad-off ``with`` and that function runs a backward, the finding is on the block (the
``with``, or the statement that turns grad off), not on that call. A statement
``torch.set_grad_enabled(False)`` gets the same deep reading over the calls that follow it in
its block up to the one that can turn grad back on.
"""
from __future__ import annotations

import ast
from typing import Callable

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.grad_modes import grad_mode_of
from gradtrace.lint.nodes import bfs_walk, walk

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def statement_calls(stmts: list[ast.stmt], ctx: Context,
                    turns_on: Callable[[ast.stmt, Context], bool]) -> list[ast.Call]:
    """The calls of ``stmts`` up to the first that can turn grad back on, in order."""
    out: list[ast.Call] = []
    for s in stmts:
        if turns_on(s, ctx):
            break
        if isinstance(s, (*DEFS, ast.ClassDef)):
            continue
        out.extend(n for n in bfs_walk(s) if isinstance(n, ast.Call))
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def trained_through(ctx: Context, grad: ast.Call, own: Callable) -> bool:  # type: ignore[type-arg]
    """A function of the file that runs a backward reaches the gradient call ``grad``, within
    the depth GT210 follows, through calls outside any grad-mode ``with``: the training path
    (NOTE [the training path run with grad off])."""
    from gradtrace.lint.rules.grad_mode._deep_gradient import MAX_DEPTH, _callees, _differentiates
    parents = file_parents(ctx)
    for fn in walk(ctx.tree):
        if not isinstance(fn, DEFS) or not any(b.accumulates
                                               for b in step_calls(ctx, fn).backwards):
            continue
        for c in walk(fn):
            if not isinstance(c, ast.Call) or _enclosing_def(c, parents) is not fn \
                    or _under_grad_mode(c, parents, ctx):
                continue
            for g, _ in _callees(c, fn, ctx):
                if g is not fn and _differentiates(ctx, g, c, own, MAX_DEPTH + 1, set()) is grad:
                    return True
    return False


def _enclosing_def(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    p = parents.get(id(node))
    while p is not None and not isinstance(p, DEFS):
        p = parents.get(id(p))
    return p


def _under_grad_mode(node: ast.AST, parents: dict[int, ast.AST], ctx: Context) -> bool:
    p = parents.get(id(node))
    while p is not None and not isinstance(p, DEFS):
        if isinstance(p, (ast.With, ast.AsyncWith)) and any(
                grad_mode_of(i.context_expr, ctx.imports) for i in p.items):
            return True
        p = parents.get(id(p))
    return False
