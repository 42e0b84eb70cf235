"""GT755: the log of a softmax, differentiated, instead of `log_softmax`."""
from __future__ import annotations

import ast
import builtins
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cuts import graphless_no_grad
from gradtrace.lint.analysis.facts import SELF_RETURNING
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._model_probs import model_probs
from gradtrace.lint.rules.numerics._ops import (
    has_positive_shift, in_training, resolve, strip, torch_op)
from gradtrace.lint.excerpt import excerpt

BUILTINS = frozenset(dir(builtins))
SOFTMAX_MODULES = frozenset({"torch.nn.Softmax", "torch.nn.modules.activation.Softmax"})


def _softmax(e: ast.AST, ctx: Context, scope: Scope | None = None) -> ast.Call | None:
    """The softmax call ``e`` is: ``torch.softmax(x, d)``, ``F.softmax``, ``x.softmax(d)``, an
    ``nn.Softmax`` module called (a name, a ``self`` attribute, or built in place); names are
    read in ``scope`` (default: the function being visited)."""
    if not isinstance(e, ast.Call):
        return None
    got = torch_op(e, ctx)
    if got is not None and got[0] == "softmax":
        return e
    f = e.func
    if isinstance(f, ast.Call) and (ctx.qualified_name(f.func) or "") in SOFTMAX_MODULES:
        return e
    if isinstance(f, (ast.Name, ast.Attribute)):
        k = ctx.analysis.kind(f, scope, e.lineno)
        if k is not None and k.what == MODULE and (k.cls or "") in SOFTMAX_MODULES:
            return e
    return None


def _from_model(e: ast.AST, ctx: Context, line: int, depth: int = 0) -> bool:
    """``e`` holds a call of a module or of a callable variable (``model(x)``,
    ``self.fc(h)``, ``net.encode(x)`` on a module), also through names bound in the same
    function (a few steps): logits that carry a gradient, not a target computed from data."""
    if depth > 3:
        return False
    for n in walk(e):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, (ast.Name, ast.Attribute)) and _softmax(n, ctx) is None:
                k = ctx.analysis.kind(f, None, line)
                if k is not None and k.what == MODULE:
                    return True
                if isinstance(f, ast.Attribute):
                    owner = ctx.analysis.kind(f.value, None, line)
                    if owner is not None and owner.what == MODULE and f.attr != "softmax" \
                            and f.attr not in SELF_RETURNING:  # `.cuda()` moves, runs nothing
                        return True
                elif k is None and not ctx.imports.is_imported(f.id) \
                        and f.id not in ctx.analysis.functions \
                        and f.id not in ctx.analysis.classes and f.id not in BUILTINS:
                    return True  # a callable variable: `model(x)` with `model` a parameter
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            v = resolve(n, ctx, line)
            if v is not n and not _graphless(v, ctx) \
                    and _from_model(v, ctx, getattr(v, "lineno", line), depth + 1):
                return True
    return False


def _graphless(v: ast.AST, ctx: Context) -> bool:
    """``v`` is computed under ``torch.no_grad()`` of the same function: it records no graph,
    whatever model made it (NOTE [logits gathered without grad])."""
    return ctx.scope().grad_off_at(v) is not None and graphless_no_grad(v)


# NOTE [logits gathered without grad]
# `with torch.no_grad(): ... all_output = torch.cat((all_output, net(x).cpu()), 0)`, then
# `all_output = nn.Softmax(dim=1)(all_output)` and `torch.log(all_output)` after the block (an
# entropy of the pseudo-labels of source-free adaptation): the logits were collected without
# grad, nothing differentiates the log. A name bound under `no_grad` is not followed to the
# model that made it; one bound after the block to a model call with grad still is.


class LogOfSoftmax(Rule):
    """`torch.log(torch.softmax(x, dim))` on a training path: where a probability rounds to 0
    the gradient of the whole row is NaN.

    Why: softmax computes `exp(x - max)`; a logit more than about 104 below its row's maximum
    (float32; about 745 in float64) gives a probability that rounds to exactly 0. Its log is
    `-inf`, and backward through `log` divides the incoming gradient by 0: `0 / 0` is NaN even
    where the loss does not use that entry (an `nll_loss` target elsewhere, a one-hot label of
    0), and softmax's backward spreads the NaN over the whole row (pytorch/pytorch#1620,
    allenai/allennlp#2797, checked on torch 2.13). Below that spread the two are equal, so the
    code works until the logits grow. `F.log_softmax(x, dim)` computes `x - logsumexp(x)` and
    stays finite; use it (or `F.cross_entropy` on the logits) instead.
    Known limits: the softmax must be in the same expression or bound to the name the log
    reads in the same function, and its input must come from a module call (`model(x)`,
    `self.fc(h)`) there: a softmax of targets or of a function's tensor arguments is not
    reported (a target distribution carries no gradient); or it ends every `return` of the
    `forward` of a model that holds weights (a class of the file, an `nn.Sequential`), whose
    output the log reads through names, indexing and selections
    (NOTE [model probabilities]).
    """

    code = "GT755"
    name = "log-of-softmax"
    message = ("`{src}` takes the log of a softmax: a logit more than about 104 below its "
               "row's maximum (float32) gives a probability of exactly 0, whose log is -inf, "
               "and backward then gives NaN gradients for the whole row, whichever entry the "
               "loss uses; use `F.log_softmax(...)` on the logits instead")
    triggers = ("log(", "log2(", "log10(")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x, y, opt):
                probs = F.softmax(model(x), dim=-1)
                loss = F.nll_loss(torch.log(probs), y)
                loss.backward()
                opt.step()
            """, at=(6, 22)),
        Bad("""
            import torch.nn as nn

            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                    self.softmax = nn.Softmax(dim=1)

                def forward(self, x):
                    return self.softmax(self.fc(x)).log()
            """, at=(10, 15)),
        Good("""
            import torch.nn.functional as F

            def train_step(model, x, y, opt):
                loss = F.nll_loss(F.log_softmax(model(x), dim=-1), y)
                loss.backward()
                opt.step()
            """),
        Good("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x, y, opt):
                probs = F.softmax(model(x), dim=-1)
                loss = F.nll_loss(torch.log(probs + 1e-8), y)
                loss.backward()
                opt.step()
            """),
        Good("""
            import torch
            import torch.nn.functional as F

            def kl_to_target(log_q, scores, temperature):
                target = F.softmax(scores / temperature, dim=-1)
                return (target * (target.log() - log_q)).sum()
            """),
        Good("""
            import torch

            @torch.no_grad()
            def entropy(model, x):
                p = torch.softmax(model(x), dim=-1)
                return -(p * torch.log(p)).sum(-1)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = torch_op(node, ctx)
        if got is None or got[0] not in ("log", "log2", "log10"):
            return
        operand = strip(got[1])
        sm = _softmax(operand, ctx)
        if sm is None and isinstance(operand, (ast.Name, ast.Attribute)):
            inner = strip(resolve(operand, ctx, node.lineno))
            sm = _softmax(inner, ctx) if inner is not operand else None
        modeled = False
        if sm is None and not has_positive_shift(operand, ctx):  # NOTE [model probabilities]
            sm = model_probs(operand, ctx, node.lineno, _softmax, SOFTMAX_MODULES)
            modeled = sm is not None
        if sm is None or has_positive_shift(operand, ctx) or not (
                modeled or _from_model(sm, ctx, node.lineno)) or not in_training(ctx, node):
            return
        related = [] if sm.lineno == node.lineno else [
            Related(ctx.path, sm.lineno, "the softmax is computed here", ctx.column(sm))]
        src = ctx.source(node)
        yield self.report(node, ctx, related=related,
                          src=excerpt(src))
