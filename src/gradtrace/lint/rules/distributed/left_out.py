"""GT459: an output of a DistributedDataParallel model that no loss reads, made by layers that
no other output uses."""
from __future__ import annotations

import ast
from dataclasses import replace
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.distributed._ddp import TRIGGERS, holds_wrapper, wrapped_class
from gradtrace.lint.rules.distributed.reducer import REDUCTION_ERROR
from gradtrace.lint.rules.registration._unused import dropped_output, tuple_call


class DdpOutputLeftOutOfLoss(Rule):
    """A `DistributedDataParallel` model returns several outputs, one is never read after the
    call, and the layers that make it feed no other output.

    Why: DDP's reducer waits, every iteration, for a gradient of every parameter. The
    parameters of a layer whose only output is dropped (a target-domain head whose prediction
    the loss leaves out) never get one: the next forward raises `RuntimeError: Expected to
    have finished reduction in the prior iteration before starting a new one` (pytorch#22436).
    With `find_unused_parameters=True` it runs, and the layer silently never trains. Put the
    output in the loss, or stop returning (and computing) it.
    `static_graph=True` does not help (pytorch#79171, verified on torch 2.13: the second
    iteration raises the same error): then the finding is on the wrapper, where
    `find_unused_parameters=True` goes.
    Known limits: the model must be an instance of a class of the file wrapped there without
    `find_unused_parameters`; its `forward` must return tuples of one length,
    unpacked into names; a name starting with `_` is a discard on purpose and is not reported.
    """

    code = "GT459"
    name = "ddp-output-left-out-of-loss"
    message = ("the loss leaves out `{out}` (line {line}), the output of `{cls}` made by "
               "`self.{attr}` alone: under DDP (wrapped at line {wrap}) its parameters never get "
               "a gradient and the next forward raises " + REDUCTION_ERROR + "; put `{out}` in "
               "the loss or stop returning it")
    message_static = ("`static_graph=True` here does not cover `{out}` (line {line}), the output "
                      "of `{cls}` made by `self.{attr}` alone that the loss leaves out: its "
                      "parameters never get a gradient and the second iteration raises "
                      + REDUCTION_ERROR + " (pytorch#79171); pass "
                      "`find_unused_parameters=True` instead, or put `{out}` in the loss")
    triggers = TRIGGERS
    examples = [
        Bad("""
            import torch.nn as nn
            import torch.nn.functional as F
            from torch.nn.parallel import DistributedDataParallel as DDP

            class TwoHeads(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                    self.cls = nn.Linear(8, 4)
                    self.aux = nn.Linear(8, 1)

                def forward(self, x):
                    h = self.body(x)
                    return self.cls(h), self.aux(h)

            def train(loader):
                model = DDP(TwoHeads())
                for x, y in loader:
                    logits, aux = model(x)
                    loss = F.cross_entropy(logits, y)
                    loss.backward()
            """, at=(20, 8)),
        Good("""
            import torch.nn as nn
            import torch.nn.functional as F
            from torch.nn.parallel import DistributedDataParallel as DDP

            class TwoHeads(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)
                    self.cls = nn.Linear(8, 4)

                def forward(self, x):
                    h = self.body(x)
                    return self.cls(h), h

            def train(loader):
                model = DDP(TwoHeads())
                for x, y in loader:
                    logits, feats = model(x)
                    loss = F.cross_entropy(logits, y)
                    loss.backward()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        for fn in [node, *(n for n in walk(node) if isinstance(n, FUNCTION_TYPES))]:
            yield from self._in(fn, ctx)

    def _in(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        scope = ctx.scope(fn)
        for st in scope.stmts:
            if not (tuple_call(st) and isinstance(st.value.func, ast.Name)):  # type: ignore[attr-defined]
                continue
            w = holds_wrapper(st.value.func.id, fn, st.lineno, ctx)  # type: ignore[attr-defined]
            if w is None or w.finds_unused:
                continue
            cls = wrapped_class(w, ctx)
            got = dropped_output(st, fn, cls, ctx) if cls is not None else None  # type: ignore[arg-type]
            if got is not None and w.static_graph:
                name, attr = got
                f = self.report(w.call, ctx, out=name, line=st.lineno, cls=cls.name,  # type: ignore[union-attr]
                                attr=attr, wrap=w.line, related=(Related(
                                    ctx.path, st.lineno, f"`{name}` is dropped here",
                                    ctx.column(st)),))
                yield replace(f, message=self.message_static.format(
                    out=name, line=st.lineno, cls=cls.name, attr=attr))  # type: ignore[union-attr]
                continue
            if got is not None:
                name, attr = got
                at = self._loss_stmt(fn, st, ctx) or st
                yield self.report(at, ctx, out=name, line=st.lineno, cls=cls.name,  # type: ignore[union-attr]
                                  attr=attr, wrap=w.line, related=(Related(
                                      ctx.path, st.lineno, f"`{name}` is dropped here",
                                      ctx.column(st)),))

    @staticmethod
    def _loss_stmt(fn: ast.AST, st: ast.stmt, ctx: Context) -> ast.stmt | None:
        """The statement that builds the loss backpropagated after ``st`` in ``fn``."""
        scope = ctx.scope(fn)
        for b in step_calls(ctx, fn).losses():
            if b.call.lineno <= st.lineno or not isinstance(b.loss, ast.Name):
                continue
            bind = scope.binding_before(b.loss.id, b.call.lineno)
            if bind is not None and bind.line > st.lineno:
                return bind.stmt
        return None
