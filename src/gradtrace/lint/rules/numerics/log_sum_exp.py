"""GT761: a log-sum-exp of log-probabilities written by hand, differentiated."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.excerpt import excerpt
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import (
    _backward_after, in_training, resolve, strip, torch_op)

_DEPTH = 4  # names followed back through the function's bindings


def _exp_summed(e: ast.AST, ctx: Context) -> ast.AST | None:
    """The argument of ``exp`` when ``e`` is ``x.exp().sum(...)`` or ``torch.sum(torch.exp(x))``."""
    if not isinstance(e, ast.Call):
        return None
    got = torch_op(e, ctx)
    if got is None or got[0] != "sum":
        return None
    inner = strip(got[1])
    if not isinstance(inner, ast.Call):
        return None
    got = torch_op(inner, ctx)
    return strip(got[1]) if got is not None and got[0] == "exp" else None


def _log_density(e: ast.AST, ctx: Context, line: int, depth: int = 0) -> ast.Call | None:
    """The ``.log_prob(...)`` call of a distribution that ``e`` is made from, in ``e`` or
    through the names it reads (each resolved at its own binding)."""
    for n in walk(e):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "log_prob":
            return n
    if depth >= _DEPTH:
        return None
    for n in walk(e):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            v = resolve(n, ctx, getattr(n, "lineno", line))
            if v is not n:
                got = _log_density(v, ctx, getattr(v, "lineno", line), depth + 1)
                if got is not None:
                    return got
    return None


def _distribution_trained(ctx: Context) -> bool:
    """The function visited is the ``log_prob`` of a ``torch.distributions`` subclass of the
    file, and a ``.log_prob(...)`` call of the file runs before a ``backward()`` of its own
    function (or script): a likelihood the step backpropagates (NOTE [trained likelihood])."""
    fn, cls = ctx.function, ctx.class_def
    if fn is None or cls is None or fn.name != "log_prob" or not any(
            (ctx.qualified_name(b) or "").startswith("torch.distributions") for b in cls.bases):
        return False
    return ctx.memo("gt761-trained-log-prob", ctx.tree, lambda: _log_prob_trained(ctx))


def _log_prob_trained(ctx: Context) -> bool:
    defs = [d for d in walk(ctx.tree) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for n in walk(ctx.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "log_prob":
            around = [d for d in defs if d.lineno <= n.lineno <= (d.end_lineno or 0)]
            scope = max(around, key=lambda d: d.lineno) if around else ctx.tree
            if _backward_after(scope, n.lineno, ctx):
                return True
    return False


# NOTE [trained likelihood]
# `class Mixture(torch.distributions.Distribution)` with a hand-written `log_prob`, returned by a
# model's `forward` and read in the loop as `loss = -model(x).log_prob(images).mean()` before
# `loss.backward()`: the callers of the method are not found through the returned instance, so
# `in_training` says no; a distribution's own `log_prob` whose calls in the file feed a
# backward is differentiated.


class HandWrittenLogSumExp(Rule):
    """`log(sum(exp(x)))` over log-probabilities on a training path: where every term of a row
    is a log-density below about -104 the sum is 0, the log -inf and the gradients NaN.

    Why: a distribution's `log_prob` is unbounded below (a narrow Normal, a sum of per-pixel
    log-likelihoods): `exp` of a value below about -104 (float32; about -745 in float64)
    rounds to exactly 0. When that holds for every term of the row, `sum` is 0, `log` gives
    -inf, the loss is infinite and backward through `log` divides by 0: the gradients are NaN
    and the next optimizer step writes NaN into every parameter behind them, with no error
    (checked on torch 2.13). `torch.logsumexp(x, dim)` subtracts the row's maximum first and
    stays finite; use it.
    Known limits: the `exp` must be summed and logged in one expression, and its argument must
    come from a `log_prob(...)` call through the function's own names; log-sum-exps of logits
    or similarities (bounded in practice) are not reported. A distribution class's own
    `log_prob` counts as trained when a `.log_prob(...)` call of the file feeds a `backward()`
    (NOTE [trained likelihood]).
    """

    code = "GT761"
    name = "hand-written-log-sum-exp"
    message = ("`{src}` is a log-sum-exp written by hand over log-probabilities (`{lp}`): where "
               "every term of a row is below about -104 (float32) `exp` gives 0, the log -inf "
               "and backward NaN gradients, which the next step writes into the parameters; use "
               "`torch.logsumexp(x, dim)`")
    triggers = ("log(",)
    examples = [
        Bad("""
            import torch

            def mixture_log_prob(dist, mix_logits, x):
                logits = dist.log_prob(x.unsqueeze(1)).sum(-1) + mix_logits
                return logits.exp().sum(dim=1).log()

            def train_step(model, x, opt):
                dist, mix_logits = model(x)
                loss = -mixture_log_prob(dist, mix_logits, x).mean()
                loss.backward()
                opt.step()
            """, at=(5, 11)),
        Good("""
            import torch

            def mixture_log_prob(dist, mix_logits, x):
                logits = dist.log_prob(x.unsqueeze(1)).sum(-1) + mix_logits
                return torch.logsumexp(logits, dim=1)

            def train_step(model, x, opt):
                dist, mix_logits = model(x)
                loss = -mixture_log_prob(dist, mix_logits, x).mean()
                loss.backward()
                opt.step()
            """),
        Good("""
            import torch

            def info_nce(z1, z2, t, opt):
                sim = z1 @ z2.T / t
                loss = (torch.log(torch.exp(sim).sum(1)) - sim.diag()).mean()
                loss.backward()
                opt.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = torch_op(node, ctx)
        if got is None or got[0] != "log":
            return
        arg = _exp_summed(strip(got[1]), ctx)
        if arg is None:
            return
        lp = _log_density(arg, ctx, node.lineno)
        if lp is None or not (in_training(ctx, node) or _distribution_trained(ctx)):
            return
        yield self.report(node, ctx, src=excerpt(ctx.source(node)), lp=excerpt(ctx.source(lp)))
