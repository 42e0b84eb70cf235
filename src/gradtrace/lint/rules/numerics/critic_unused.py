"""GT765: a critic is fit to the returns, but the policy term weighs by the raw returns."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.regressions import operands, regressed
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._tensors import node_mentions

DETACHES = ("detach", "squeeze", "view", "flatten", "reshape", "float")


def _name(e: ast.AST) -> str | None:
    """The dotted name ``e`` reads, through ``.detach()``/``.squeeze()``-style calls."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in DETACHES:
        e = e.func.value
    return dotted(e) if isinstance(e, (ast.Name, ast.Attribute)) else None


def _fits(n: ast.AST, ctx: Context, scope: Scope) -> tuple[str, str, ast.AST] | None:
    """(a, b, node) when ``n`` regresses one name on another (:func:`.regressions.regressed`)."""
    got = regressed(n, ctx, scope)
    a, b = (_name(got[0]), _name(got[1])) if got is not None else (None, None)
    return (a, b, n) if a and b and a != b else None


def _maybe_fit(n: ast.AST) -> bool:
    """``n`` may regress one name on another (by its shape only)."""
    got = operands(n)
    return got is not None and _name(got[0]) is not None and _name(got[1]) is not None


def _mentions(e: ast.AST, name: str) -> bool:
    return any(isinstance(x, (ast.Name, ast.Attribute)) and dotted(x) == name for x in walk(e))


class CriticNotUsedAsBaseline(Rule):
    """A policy-gradient term weighs log-probabilities by the returns that a critic is fit
    to in the same update, and the critic's values never enter it.

    Why: `policy_loss = -(returns * log_probs).sum()` next to
    `value_loss = F.smooth_l1_loss(returns, values)` trains a critic that the actor never
    uses: the actor's gradient is the same whatever the critic predicts (REINFORCE without a
    baseline, with its variance), and the critic's training is wasted (bentrevett's
    pytorch-rl actor-critic, fixed to weigh by `returns - values.detach()`; checked on torch
    2.13). Weigh the log-probabilities by the advantage `returns - values.detach()`.
    Known limits: one function: the regression must be a `torch.nn.functional` regression
    loss, an `nn.MSELoss`-style module, or a squared difference, of two names; the policy term
    a negated product of the regressed target with something that mentions neither the values
    nor a name bound from them.
    """

    code = "GT765"
    name = "critic-not-used-as-baseline"
    message = ("`{term}` weighs by `{target}`, which `{fit}` fits `{values}` to, but `{values}` "
               "never enters this term: the critic does not act as a baseline; weigh by "
               "`{target} - {values}.detach()`")
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch.nn.functional as F
            def update(returns, log_probs, values, opt):
                policy_loss = -(returns * log_probs).sum()
                value_loss = F.mse_loss(values, returns)
                opt.zero_grad()
                (policy_loss + value_loss).backward()
                opt.step()
            """, at=(3, 20)),
        Good("""
            import torch.nn.functional as F
            def update(returns, log_probs, values, opt):
                advantages = returns - values.detach()
                policy_loss = -(advantages * log_probs).sum()
                value_loss = F.mse_loss(values, returns)
                opt.zero_grad()
                (policy_loss + value_loss).backward()
                opt.step()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if not node_mentions(ctx, node, "backward") or not node_mentions(ctx, node, "*"):
            return
        if not any(isinstance(n.op, ast.USub) and any(  # type: ignore[attr-defined]
                isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mult) for m in walk(
                n.operand)) for n in of_types(node, (ast.UnaryOp,))):  # type: ignore
            return  # no `-(a * b)` anywhere in it: no term below (the walk index's nodes)
        nodes = list(scope_nodes(node))
        terms = [n for n in nodes if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)
                 and any(isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mult)
                         and (_name(m.left) or _name(m.right)) for m in walk(n.operand))]
        if not terms or not any(_maybe_fit(n) for n in nodes):
            return  # the cheap tests before any data flow
        scope = ctx.scope(node)
        fits = [f for f in (_fits(n, ctx, scope) for n in nodes) if f is not None]
        if not fits:
            return
        for n in terms:
            for m in walk(n.operand):
                if not (isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mult)):
                    continue
                for side, other in ((m.left, m.right), (m.right, m.left)):
                    target = _name(side)
                    if target is None:
                        continue
                    for a, b, fit in fits:
                        if target not in (a, b):
                            continue
                        values = b if target == a else a
                        if _from(scope, target, values, m.lineno) \
                                or _uses(scope, other, values, m.lineno):
                            continue
                        where = Related(ctx.path, fit.lineno,  # type: ignore[attr-defined]
                                        f"`{values}` is fit to `{target}` here", ctx.column(fit))
                        yield self.report(m, ctx, related=(where,), term=ctx.source(m),
                                          target=target, values=values, fit=ctx.source(fit))
                        return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def _from(scope: Scope, name: str, values: str, line: int, depth: int = 0) -> bool:
    """``name`` is bound (a few steps back) from an expression mentioning ``values``."""
    if depth > 3:
        return False
    b = scope.binding_before(name, line)
    if b is None or b.value is None:
        return False
    if _mentions(b.value, values):
        return True
    return any(isinstance(x, ast.Name) and x.id != name
               and _from(scope, x.id, values, b.line, depth + 1) for x in walk(b.value))


def _uses(scope: Scope, e: ast.AST, values: str, line: int) -> bool:
    return _mentions(e, values) or any(
        isinstance(x, ast.Name) and _from(scope, x.id, values, line) for x in walk(e))
