"""GT139: a projection coefficient `<a, b> / ||b||^2` with no epsilon under the energy."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import has_positive_shift, in_training, resolve, spelled

REDUCTIONS = ("sum", "mean")


def _reduced(e: ast.AST, ctx: Context) -> ast.AST | None:
    """``x`` of ``x.sum(...)`` / ``torch.sum(x, ...)`` (``mean`` alike)."""
    if not isinstance(e, ast.Call):
        return None
    f = e.func
    q = ctx.qualified_name(f) or ""
    if q in ("torch.sum", "torch.mean") and e.args:
        return e.args[0]
    if isinstance(f, ast.Attribute) and f.attr in REDUCTIONS and not q.startswith(
            ("torch.", "numpy.", "np.")):
        return f.value
    return None


def _squared(e: ast.AST) -> ast.AST | None:
    """``b`` of ``b ** 2``, ``b * b``, ``b.pow(2)``, ``b.square()``."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow) and isinstance(e.right, ast.Constant) \
            and e.right.value == 2:
        return e.left
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) and spelled(e.left) == spelled(e.right):
        return e.left
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        if e.func.attr == "square" and not e.args:
            return e.func.value
        if e.func.attr == "pow" and len(e.args) == 1 and isinstance(e.args[0], ast.Constant) \
                and e.args[0].value == 2:
            return e.func.value
    return None


class ProjectionOntoBareEnergy(Rule):
    """`(x * t).sum(-1) / (t ** 2).sum(-1)`: a projection coefficient with no epsilon under the energy.

    Why: the scale that projects one signal onto another (the optimal scaling of SI-SDR and
    SI-SNR losses, a Gram-Schmidt step, a least-squares gain) divides by the energy of the
    signal projected onto. A silent target (an all-zero source in a mixture, a padded clip)
    has energy exactly 0, and so has its inner product with anything: the coefficient is
    0/0 = NaN, the loss is NaN, every gradient is NaN, and after one `optimizer.step()` every
    weight is NaN, with no error (auraloss#26; checked on torch 2.13). Add an epsilon to the
    energy: `(x * t).sum(-1) / ((t ** 2).sum(-1) + eps)`.
    Known limits: the numerator is the sum (or mean) of a product with the same value whose
    squares the denominator sums, spelled alike (or a name bound once to either); only where a
    gradient or a loss is computed after it.
    """

    code = "GT139"
    name = "projection-onto-bare-energy"
    message = ("`{den}` is exactly 0 when `{b}` is all zeros (a silent target), and so is the "
               "inner product over it: `{expr}` is 0/0 = NaN, and the loss, the gradients and "
               "the weights after the step become NaN; add an epsilon to the energy")
    triggers = ("sum", "mean")
    examples = [
        Bad("""
            import torch
            def si_snr_loss(est, ref):
                scale = (est * ref).sum(-1, keepdim=True) / (ref ** 2).sum(-1, keepdim=True)
                proj = scale * ref
                noise = est - proj
                return -10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + 1e-8) + 1e-8).mean()
            """, at=(3, 12)),
        Good("""
            import torch
            def si_snr_loss(est, ref, eps=1e-8):
                scale = (est * ref).sum(-1, keepdim=True) / ((ref ** 2).sum(-1, keepdim=True) + eps)
                proj = scale * ref
                noise = est - proj
                return -10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps).mean()
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.op, ast.Div):
            return
        line = node.lineno
        den = resolve(node.right, ctx, line)
        if has_positive_shift(den, ctx):
            return
        inner = _reduced(den, ctx)
        b = _squared(inner) if inner is not None else None
        if b is None:
            return
        num = _reduced(resolve(node.left, ctx, line), ctx)
        if not (isinstance(num, ast.BinOp) and isinstance(num.op, ast.Mult)):
            return
        sides = (spelled(num.left), spelled(num.right))
        if sides[0] == sides[1] or spelled(b) not in sides:
            return  # `(t * t).sum() / (t ** 2).sum()` is 1, not a projection
        if not in_training(ctx, node):
            return
        yield self.report(node, ctx, den=ctx.source(node.right)[:40], b=ctx.source(b)[:30],
                          expr=ctx.source(node)[:60])
