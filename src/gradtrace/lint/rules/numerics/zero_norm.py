"""GT799: a ReLU output divided by its own norm without an epsilon."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.zero_rows import rectified
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import in_training

NORMS = frozenset({"torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm"})


def _norm_of(e: ast.AST, ctx: Context) -> ast.expr | None:
    """The tensor ``e`` is the bare norm of: ``torch.norm(x, ...)``, ``x.norm(...)``,
    ``torch.linalg.(vector_)norm(x, ...)`` (no epsilon, no clamp around it)."""
    if not isinstance(e, ast.Call):
        return None
    f = e.func
    q = ctx.qualified_name(f) or ""
    if q in NORMS:
        return e.args[0] if e.args and not isinstance(e.args[0], ast.Starred) \
            and _per_row(e, 2) else None
    if isinstance(f, ast.Attribute) and f.attr == "norm" and not q.startswith("torch.") \
            and not (isinstance(f.value, ast.Name) and f.value.id == "self") \
            and not (isinstance(f.value, ast.Name) and ctx.imports.is_imported(f.value.id)) \
            and _per_row(e, 1):
        return f.value
    return None


def _per_row(norm: ast.Call, at: int) -> bool:
    """The norm is taken along a dimension (``dim=1``, or the positional ``dim`` at index
    ``at``), one per row. Without one it is the norm of the whole tensor, 0 only when every
    element of the batch is 0 (``o / torch.norm(o, p=2)``): a zero row alone gives 0, not
    NaN."""
    return any(k.arg == "dim" for k in norm.keywords) or len(norm.args) > at


class ReluOutputOverOwnNorm(Rule):
    """A ReLU output is divided by its own norm with no epsilon:
    `x / torch.norm(x, dim=1, keepdim=True)` with `x = self.relu(self.linear(h))`.

    Why: a ReLU output is exactly 0 wherever its input is negative, and with a few units a
    whole row of it is 0 (a dead unit set, an outlier input): its norm is 0 and the row
    becomes 0 / 0 = NaN, which the loss and, after one step, the weights inherit
    (CorentinJ/Real-Time-Voice-Cloning#678: a 4-unit embedding, loss NaN and every parameter
    NaN after the first step; checked on torch 2.13). Add an epsilon to the norm
    (`x / (x.norm(dim=1, keepdim=True) + 1e-5)`), clamp it (`.clamp(min=eps)`), or use
    `F.normalize(x, dim=1)`, whose `eps` does the same. The ReLU output is recognised as
    NOTE [rectified values] says: `F.relu`, `x.relu()`, `clamp(min=0)`, an `nn.ReLU`
    module (or a Sequential ending in one), or a name bound once to one of these.
    Known limits: the division and its norm must be spelt together (`x / x.norm(...)`,
    `x /= torch.norm(x, ...)`), on a path that is differentiated, the norm taken along a
    `dim` (a norm of the whole tensor is 0 only when all of it is).
    """

    code = "GT799"
    name = "relu-output-over-own-norm"
    message = ("`{x}` is a ReLU output (line {line}): a row of it can be exactly 0, and "
               "dividing it by its own norm gives 0 / 0 = NaN there; add an epsilon to the "
               "norm (`+ 1e-5`, `.clamp(min=1e-5)`) or use `F.normalize`")
    triggers = ("norm(",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = nn.Linear(16, 4)
                    self.relu = nn.ReLU()

                def forward(self, h):
                    embeds_raw = self.relu(self.linear(h))
                    return embeds_raw / torch.norm(embeds_raw, dim=1, keepdim=True)
            """, at=(12, 15)),
        Good("""
            import torch
            import torch.nn as nn

            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = nn.Linear(16, 4)
                    self.relu = nn.ReLU()

                def forward(self, h):
                    embeds_raw = self.relu(self.linear(h))
                    return embeds_raw / (torch.norm(embeds_raw, dim=1, keepdim=True) + 1e-5)
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.op, ast.Div):
            yield from self._check(node, node.left, node.right, ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.op, ast.Div):
            yield from self._check(node, node.target, node.value, ctx)

    def _check(self, node: ast.AST, num: ast.expr, den: ast.expr,
               ctx: Context) -> Iterator[Finding]:
        x = _norm_of(den, ctx)
        if x is None or not isinstance(num, ast.Name) or ctx.source(x) != num.id:
            return
        relu = rectified(num, ctx, node.lineno)  # type: ignore[attr-defined]
        if relu is None or not in_training(ctx, node):
            return
        yield self.report(node, ctx, related=(Related(
            ctx.path, relu.lineno, f"`{num.id}` is made by a ReLU here", ctx.column(relu)),),
            x=num.id, line=relu.lineno)
