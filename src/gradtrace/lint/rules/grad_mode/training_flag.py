"""GT209: a module ties grad mode to its own train/eval flag."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule


def _reads_training(e: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and dotted(n) == "self.training" for n in walk(e))


class GradModeTiedToTrainingFlag(Rule):
    """`torch.set_grad_enabled(self.training)` in a module: putting the module in eval mode
    turns its gradients off.

    Why: `model.eval()` is meant to change dropout and batch norm, not autograd. A module
    whose forward runs under `set_grad_enabled(self.training)` records nothing in eval mode,
    so every gradient taken through it then fails: an input gradient or attack on the
    evaluated model, `torch.autograd.grad` in a test, a fine-tune that keeps the network in
    eval mode to freeze batch-norm statistics raise `RuntimeError: element 0 of tensors does
    not require grad and does not have a grad_fn`, or silently leave the layers before it
    untrained (NVIDIA/TransformerEngine#72, checked on torch 2.13). Leave grad mode to the
    caller: evaluation code wraps itself in `torch.no_grad()`.
    Known limits: only `set_grad_enabled(...)` reading `self.training` in a method of an
    `nn.Module` subclass of this file is reported.
    """

    code = "GT209"
    name = "grad-mode-tied-to-training-flag"
    message = ("`{call}` turns gradients off whenever `{cls}` is in eval mode: a gradient "
               "taken through it after `.eval()` (input gradients, `autograd.grad` in a "
               "test, a fine-tune with batch norm kept in eval) raises `element 0 of tensors "
               "does not require grad` or leaves the layers before it untrained; let the "
               "caller choose grad mode (`torch.no_grad()` in evaluation code)")
    triggers = ("set_grad_enabled",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            class Linear(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(n, n))

                def forward(self, x):
                    with torch.set_grad_enabled(self.training):
                        return F.linear(x, self.weight)
            """, at=(11, 13)),
        Good("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            class Linear(nn.Module):
                def __init__(self, n, frozen=False):
                    super().__init__()
                    self.frozen = frozen
                    self.weight = nn.Parameter(torch.randn(n, n))

                def forward(self, x):
                    with torch.set_grad_enabled(not self.frozen):
                        return F.linear(x, self.weight)
            """),
        Good("""
            import torch

            def run_epoch(model, loader, train):
                model.train(train)
                with torch.set_grad_enabled(model.training):
                    for x in loader:
                        model(x)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if (ctx.qualified_name(node.func) or "") != "torch.set_grad_enabled" \
                or not node.args or not _reads_training(node.args[0]):
            return
        cls = ctx.class_def
        info = ctx.analysis.classes.get(cls.name) if cls is not None else None
        if info is None or not info.is_module or ctx.function is None:
            return
        yield self.report(node, ctx, call=ctx.source(node), cls=cls.name)  # type: ignore[union-attr]
