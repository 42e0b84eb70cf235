"""GT566: a method's loss reads a graph an earlier method stored on `self` and already freed."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.freed_attrs import later_reads
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule


class AttributeGraphFreedByEarlierMethod(Rule):
    """A method backpropagates a loss built from `self.<a>`, a value an earlier method of the
    class stored there and already backpropagated through.

    Why: a model class that splits its step into methods (`backward_D`, then `backward_G`,
    both run by `optimize_parameters`) keeps intermediate values on `self`. When the first
    method's `loss.backward()` (without `retain_graph=True`) runs through `self.pred_fake`, the
    saved tensors of that graph are freed; a later method that builds its own loss from the same
    `self.pred_fake` raises `RuntimeError: Trying to backward through the graph a second time`
    at its backward (Shift-Net issue 34; checked on torch 2.13). `retain_graph=True` would only
    trade it for 'modified by an inplace operation' once an optimizer steps in between. Compute
    the value again in the later method (`pred_fake = self.netD(fake)`), as its own forward.
    NOTE [attribute freed by an earlier method] says which methods count as earlier.
    Known limits: both methods are of one class of the file, run as `self.A()` then `self.B()`
    in one method of it; the attribute is bound by `A` to a value carrying a graph and reached
    by `A`'s backward through names of `A`.
    """

    code = "GT566"
    name = "attribute-graph-freed-by-earlier-method"
    message = ("`{attr}` was backpropagated through by `{first}` (line {line}) in `{earlier}`, "
               "which freed its graph: this loss reads it again, and `{second}` raises "
               "`RuntimeError: Trying to backward through the graph a second time`")
    triggers = ("backward",)
    gate_statements = True
    examples = [
        Bad("""
            class GAN:
                def backward_d(self, real, fake):
                    self.score_fake = self.net_d(fake.detach())
                    self.loss_d = bce(self.net_d(real), 1) + bce(self.score_fake, 0)
                    self.loss_d.backward()

                def backward_g(self, fake):
                    self.loss_g = bce(self.score_fake, 1)
                    self.loss_g.backward()

                def step(self, real, fake):
                    self.backward_d(real, fake)
                    self.backward_g(fake)
            """, at=(8, 8)),
        Good("""
            class GAN:
                def backward_d(self, real, fake):
                    self.score_fake = self.net_d(fake.detach())
                    self.loss_d = bce(self.net_d(real), 1) + bce(self.score_fake, 0)
                    self.loss_d.backward()

                def backward_g(self, fake):
                    score_fake = self.net_d(fake)
                    self.loss_g = bce(score_fake, 1)
                    self.loss_g.backward()

                def step(self, real, fake):
                    self.backward_d(real, fake)
                    self.backward_g(fake)
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.class_of(node)
        if cls is None or cls.methods.get(node.name) is not node:
            return
        for stmt, attr, earlier, first, second in later_reads(ctx, cls, node):
            rel = (Related(ctx.path, first.call.lineno,
                           f"`{ctx.source(first.call)}` frees the graph of `{attr}`",
                           ctx.column(first.call)),
                   Related(ctx.path, second.call.lineno, "the second backward raises here",
                           ctx.column(second.call)))
            yield self.report(stmt, ctx, related=rel, attr=attr, first=ctx.source(first.call),
                              line=first.call.lineno, earlier=earlier.name,
                              second=ctx.source(second.call))

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
