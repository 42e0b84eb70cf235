"""Regressions: a node that fits one value to another (``F.mse_loss(a, b)``, ``criterion(a, b)``
of an ``nn.MSELoss``, ``(a - b).pow(2)``, ``(a - b) ** 2``, ``(a - b).square()``), read by the
actor-critic rules (GT765, GT767)."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope

# regression losses: `loss(a, b)` fits one to the other
REGRESSIONS = frozenset({"mse_loss", "smooth_l1_loss", "huber_loss", "l1_loss"})
REGRESSION_MODULES = frozenset({"torch.nn.MSELoss", "torch.nn.SmoothL1Loss", "torch.nn.HuberLoss",
                                "torch.nn.L1Loss"})


def operands(n: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """By shape only, the two values ``n`` may regress on each other: the first two arguments
    of a call, or the two sides of a squared difference."""
    if isinstance(n, ast.Call) and len(n.args) >= 2:
        return n.args[0], n.args[1]
    diff = n.left if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) else \
        n.func.value if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
        and n.func.attr in ("pow", "square") else None
    if isinstance(diff, ast.BinOp) and isinstance(diff.op, ast.Sub):
        return diff.left, diff.right
    return None


def regressed(n: ast.AST, ctx: Context, scope: Scope) -> tuple[ast.expr, ast.expr] | None:
    """The two values ``n`` regresses on each other, when it is a regression: a regression
    loss of ``torch.nn.functional``, a call of a regression loss module (by its kind), or a
    squared difference."""
    got = operands(n)
    if got is None or not (isinstance(n, ast.Call) and len(n.args) >= 2):
        return got  # none, or a squared difference
    q = ctx.qualified_name(n.func) or ""
    if q.startswith("torch.nn.functional.") and q.rpartition(".")[2] in REGRESSIONS:
        return got
    if isinstance(n.func, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind(n.func, scope, n.lineno)
        if k is not None and k.what == MODULE and (k.cls or "") in REGRESSION_MODULES:
            return got
    return None
