"""GT106: `requires_grad` forced on a loss that has lost its graph (the band-aid that hides the
break)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

from gradtrace.lint.rules.graph_breaks._base import (
    _file_has, worth_reporting, band_aids, related_for, short,
)
from gradtrace.lint.rules.graph_breaks._paths import loss_paths


class RequiresGradBandAid(Rule):
    """`requires_grad` is forced on a loss that has lost its graph, which hides the break.

    Why: setting `loss.requires_grad = True` only works on a leaf: on a loss still on the graph
    it raises `RuntimeError: you can only change requires_grad flags of leaf variables.` So when
    the line runs, the loss is already cut (by `.item()`, `.detach()`, `torch.tensor(...)`, ...),
    and `backward()` now runs without the element-0 error and gives no parameter a gradient:
    training silently does nothing. `torch.tensor(x, requires_grad=True)` and
    `loss.requires_grad_()` on a cut loss do the same. Remove the band-aid and fix the cut.
    Known limits: follows names inside one function; `requires_grad_()` on an input for a
    saliency map (not the loss) is never reported.
    """

    code = "GT106"
    gate_statements = True
    name = "requires-grad-band-aid"
    message = ("`{expr}` forces `requires_grad` on `{loss}`, which is no longer on the graph: "
               "`backward()` (line {line}) runs and no parameter gets a gradient{cause}")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch

            def train_step(model, opt, x, y, criterion):
                loss = criterion(model(x), y)
                loss = torch.tensor(loss.item(), requires_grad=True)
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(5, 11)),
        Bad("""
            def train_step(model, opt, x, y, criterion):
                loss = criterion(model(x).detach(), y)
                loss.requires_grad = True
                loss.backward()
            """, at=(3, 4)),
        Good("""
            import torch

            def saliency(model, x, label):
                x = x.clone().requires_grad_()
                score = model(x)[0, label]
                score.backward()
                return x.grad.abs()
            """),
        Good("""
            import torch

            def fit(w_init, x, y, steps=10):
                w = torch.tensor(w_init, requires_grad=True)
                for _ in range(steps):
                    loss = ((x @ w - y) ** 2).mean()
                    loss.backward()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        if not worth_reporting(node, ctx) or not _file_has(ctx, ("backward",)):
            return
        lp = loss_paths(ctx, node)
        seen: set[int] = ctx.memo("gt1-reported-" + self.code, ctx.tree, set)
        for v in lp.verdicts:
            cuts = [c for _, cs in v.cut_terms for c in cs]
            cut_nodes = {id(c.node) for c in cuts}
            for b in band_aids(v, lp):
                if id(b) in seen or id(b) in cut_nodes:  # `torch.tensor(t, requires_grad=True)`
                    continue                             # is reported once, as the cut
                seen.add(id(b))
                first = cuts[0]
                rel = related_for(first, v, ctx) + (
                    Related(ctx.path, first.node.lineno,
                            f"`{short(ctx.source(first.node), 40)}` cut the graph here",
                            ctx.column(first.node)),)
                yield self.report(
                    b, ctx, related=rel, expr=short(ctx.source(b)),
                    loss=short(ctx.source(v.sink.value), 30),
                    line=v.sink.node.lineno,  # type: ignore[attr-defined]
                    cause=f"; the graph was cut at line {first.node.lineno}")
