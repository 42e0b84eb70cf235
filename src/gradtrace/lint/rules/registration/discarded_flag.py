"""GT489: a `requires_grad` comparison written as a statement: the freeze it meant is a no-op."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.params import FLAG
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

_EQUALITY = (ast.Eq, ast.Is, ast.NotEq, ast.IsNot)


def _flag_side(e: ast.expr) -> ast.Attribute | None:
    return e if isinstance(e, ast.Attribute) and e.attr == FLAG else None


class DiscardedFlagComparison(Rule):
    """`p.requires_grad == False` as a statement compares and throws the result away: no
    flag changes.

    Why: an expression statement's value is discarded, so `p.requires_grad == False` (or
    `is False`) in a freeze loop leaves every parameter requiring grad; the optimizer
    (also one built over `filter(lambda p: p.requires_grad, ...)`) keeps moving the layers meant
    to stay frozen, silently. Checked on torch 2.13: the "frozen" weights change after
    `opt.step()`. Write `p.requires_grad = False` or `module.requires_grad_(False)`.
    Known limits: only a comparison that is the whole statement, with `.requires_grad` on one
    side; a comparison kept in a name, an `assert` or a condition is a test, not reported.
    """

    code = "GT489"
    name = "discarded-flag-comparison"
    message = ("`{expr}` compares and discards the result: `{target}.requires_grad` is not "
               "changed; write `{target}.requires_grad = {value}`")
    triggers = (FLAG,)
    examples = [
        Bad("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
            for p in model[0].parameters():
                p.requires_grad == False
            """, at=(4, 4)),
        Bad("""
            def freeze(module):
                for name, param in module.named_parameters():
                    if name.startswith("encoder."):
                        param.requires_grad is False
            """, at=(4, 12)),
        Good("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
            for p in model[0].parameters():
                p.requires_grad = False
            assert all(p.requires_grad == False for p in model[0].parameters())
            frozen = model[1].weight.requires_grad == False
            """),
    ]

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        e = node.value
        if not isinstance(e, ast.Compare) or len(e.ops) != 1 \
                or not isinstance(e.ops[0], _EQUALITY):
            return
        flag = _flag_side(e.left) or _flag_side(e.comparators[0])
        if flag is None:
            return
        other = e.comparators[0] if flag is e.left else e.left
        value = ctx.source(other)
        if isinstance(e.ops[0], (ast.NotEq, ast.IsNot)):
            value = f"not {value}" if not isinstance(other, ast.Constant) \
                else str(not other.value)
        yield self.report(node, ctx, expr=ctx.source(e), target=ctx.source(flag.value),
                          value=value)
