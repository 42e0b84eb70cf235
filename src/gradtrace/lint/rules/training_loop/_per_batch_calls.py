"""GT526 through calls: a scheduler stepped, with the optimizer, in a function that holds no
loop but runs once per pass of a batch loop of its caller (NOTE [loops through calls])."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.call_loops import loop_chains
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.training_loop._loop import LoopFacts, facts

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

EpochCounted = Callable[..., "str | None"]


def stepped_per_batch(f: LoopFacts, stmt: ast.stmt, receiver: ast.expr, period: ast.expr,
                      opt_steps: list, epoch_counted: EpochCounted, ctx: Context) -> str | None:
    """Why the scheduler step ``stmt`` (no loop around it in ``f``) runs once per batch: the
    name by which ``period`` counts the epochs of the outer loop of a chain of loops the
    function runs in; None when not known."""
    if not isinstance(f.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not any(
            f.loops_of(st) == () for _, st, _ in opt_steps):
        return None
    path = dotted(receiver)
    if path is None or not _steady(f, stmt, path):
        return None
    for chain in loop_chains(ctx, f.node):
        if len(chain) < 2:
            continue
        (outer, outer_fn), (inner, inner_fn) = chain[-2], chain[-1]
        if epoch_counted(period, inner, facts(ctx, inner_fn), vocab=False) is not None:
            continue  # the loop running it is the epoch loop
        why = epoch_counted(period, outer, facts(ctx, outer_fn))
        if why is not None:
            return why
    return None


def _steady(f: LoopFacts, stmt: ast.stmt, path: str) -> bool:
    """Every ``if`` of ``f`` around ``stmt`` tests only the scheduler itself (``if
    self.scheduler:``, its class's name, ``isinstance`` against torch's classes): the same on
    every call."""
    for s in f.scope.stmts:
        if not (isinstance(s, ast.If) and s is not stmt and f.inside(stmt, s)):
            continue
        for n in ast.walk(s.test):
            if isinstance(n, ast.Call) and dotted(n.func) not in ("isinstance", "type"):
                return False
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
                d = dotted(n) or ""
                if not (d == path or d.startswith(path + ".") or path.startswith(d + ".")
                        or d in ("isinstance", "type")
                        or (f.ctx.qualified_name(n) or "").startswith("torch.")):
                    return False
    return True
