"""GT776: a value standardised by its own standard deviation with no epsilon."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import in_training, resolve, spelled

NUMPY = ("numpy.", "np.")


def _reduced(e: ast.AST, op: str, ctx: Context) -> ast.AST | None:
    """``x`` when ``e`` is ``x.<op>(...)`` or ``torch.<op>(x, ...)`` (``np.<op>(x)``: NumPy's
    statistics standardise data before any tensor exists, no gradient goes through them)."""
    if not isinstance(e, ast.Call):
        return None
    f = e.func
    q = ctx.qualified_name(f) or ""
    if q == f"torch.{op}" and e.args:
        return e.args[0]
    if isinstance(f, ast.Attribute) and f.attr == op and not q.startswith(("torch.", *NUMPY)):
        return f.value
    return None


class StandardisedByBareStd(Rule):
    """`(x - x.mean()) / x.std()`: a standardisation with no epsilon under the deviation.

    Why: the standard deviation is exactly 0 when every value along the reduced dimension is
    equal (an episode whose rewards are all 0, a constant feature, a padded frame), and the
    unbiased one (the default of `std`) is NaN over a single element (a one-frame utterance,
    a batch of one). `(x - mean) / std` is then `0 / 0` = NaN, and the NaN goes into the loss
    and, after one step, into every weight (ray-project/ray rllib's advantage standardisation
    on all-zero rewards; fairseq's mean-variance normalisation of a one-frame utterance:
    checked on torch 2.13 and NumPy). Divide by `std + 1e-8` (or `std.clamp(min=eps)`); the
    usual advantage normalisation is `(adv - adv.mean()) / (adv.std() + 1e-8)`.
    Known limits: the numerator subtracts the mean of the same value (spelled alike, or a
    name bound to it in the same function), the denominator is its bare `std` (or a name
    bound once to it and not changed after); only where a gradient or a loss is computed
    after it: in a `forward`, a loss, or code that runs `backward()` (a helper a `forward`
    calls, often an inference wrapper's input normalisation, is not reported); `np.std(...)`
    and `np.mean(...)` (data standardised before it becomes a tensor) are not read.
    """

    code = "GT776"
    name = "standardised-by-bare-std"
    message = ("`{std}` is exactly 0 when every value of `{x}` along it is equal (and NaN over "
               "one element, unbiased): `{expr}` is then 0/0 = NaN, which reaches the loss and "
               "the weights; divide by `std + eps`")
    triggers = ("std",)
    examples = [
        Bad("""
            import torch

            def policy_loss(log_probs, returns):
                adv = (returns - returns.mean()) / returns.std()
                loss = -(log_probs * adv).mean()
                loss.backward()
            """, at=(4, 39)),
        Bad("""
            import torch

            def mv_norm(features):
                mean = features.mean(dim=0)
                std = features.std(dim=0)
                return (features - mean) / std

            def step(model, feats, y, opt):
                loss = torch.nn.functional.cross_entropy(model(mv_norm(feats)), y)
                loss.backward()
                opt.step()
            """, at=(5, 10)),
        Good("""
            import torch

            def policy_loss(log_probs, returns):
                adv = (returns - returns.mean()) / (returns.std() + 1e-8)
                loss = -(log_probs * adv).mean()
                loss.backward()
            """),
        Good("""
            import torch

            def policy_loss(log_probs, advs):
                adv_std = advs.std()
                adv_std += 1e-8
                adv = (advs - advs.mean()) / adv_std
                loss = -(log_probs * adv).mean()
                loss.backward()
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.op, ast.Div) or not isinstance(node.left, ast.BinOp) \
                or not isinstance(node.left.op, ast.Sub):
            return
        line = node.lineno
        std = resolve(node.right, ctx, line)
        x = _reduced(std, "std", ctx)
        if x is None:
            return
        m = _reduced(resolve(node.left.right, ctx, line), "mean", ctx)
        if m is None or not spelled(m) == spelled(x) == spelled(node.left.left):
            return
        if not in_training(ctx, node, through_forward=False):
            return  # a helper of a `forward`: statistics of the input (an inference wrapper)
        related = () if std is node.right else (Related(
            ctx.path, std.lineno, "the deviation divided by is computed here",  # type: ignore
            ctx.column(std)),)
        yield self.report(std, ctx, related=related, std=ctx.source(std)[:40],
                          x=ctx.source(x)[:30], expr=ctx.source(node)[:60])
