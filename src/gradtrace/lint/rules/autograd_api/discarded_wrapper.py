"""GT728: a grad-mode object applied to a function as a statement: the wrapped function is
built and thrown away, never called."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

# NOTE [grad-mode object called on a function]
# `torch.enable_grad()`, `no_grad()`, `inference_mode()` and `set_grad_enabled(b)` are context
# managers that are also decorators: calling one on a function returns a new function that runs
# it under that mode (torch 2.13, `_DecoratorContextManager.__call__`); it does not run it. As an
# expression statement the result is discarded, so the function never runs at all.
MODES = frozenset({
    "torch.enable_grad", "torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled",
    "torch.autograd.grad_mode.enable_grad", "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode", "torch.autograd.grad_mode.set_grad_enabled",
    "torch.autograd.enable_grad", "torch.autograd.no_grad",
})


class GradModeWrapperDiscarded(Rule):
    """`torch.enable_grad()(closure)` (or `no_grad()`, `inference_mode()`,
    `set_grad_enabled(b)`) written as a statement: the function is wrapped, not called.

    Why: a grad-mode object called on a function returns a decorated copy of it
    (NOTE [grad-mode object called on a function]); nothing runs until that copy is called.
    Written alone on a line, the copy is discarded and the function never runs: an optimizer's
    `step(closure)` that meant to re-evaluate the loss with gradients on (`closure` computes
    the loss and calls `backward()`) steps on the stale gradients of the previous pass instead
    (davda54/sam before commit 3a6c392: SAM's second step used the gradient at `w`, not at
    `w + e(w)`, so it was plain SGD; checked on torch 2.13: the closure is called 0 times).
    Call the result (`torch.enable_grad()(closure)()`) or write `with torch.enable_grad():
    closure()`.
    Known limits: only the statement form; a wrapper bound to a name and never called is not
    followed.
    """

    code = "GT728"
    name = "grad-mode-wrapper-discarded"
    message = ("`{stmt}` builds a function that runs `{fn}` under `{mode}` and throws it away: "
               "`{fn}` is never called here; call it (`{stmt}()`, or `with {mode}: {fn}()`)")
    triggers = ("enable_grad", "no_grad", "inference_mode", "set_grad_enabled")
    gate_statements = True
    examples = [
        Bad("""
            import torch
            class TwoStep(torch.optim.Optimizer):
                @torch.no_grad()
                def step(self, closure=None):
                    for g in self.param_groups:
                        for p in g["params"]:
                            p.add_(p.grad, alpha=0.05)
                    torch.enable_grad()(closure)
                    for g in self.param_groups:
                        for p in g["params"]:
                            p.sub_(p.grad, alpha=g["lr"])
            """, at=(8, 8)),
        Good("""
            import torch
            class TwoStep(torch.optim.Optimizer):
                @torch.no_grad()
                def step(self, closure=None):
                    for g in self.param_groups:
                        for p in g["params"]:
                            p.add_(p.grad, alpha=0.05)
                    closure = torch.enable_grad()(closure)
                    closure()
                    for g in self.param_groups:
                        for p in g["params"]:
                            p.sub_(p.grad, alpha=g["lr"])
            """),
    ]

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        v = node.value
        if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Call)
                and len(v.args) == 1 and not v.keywords
                and not isinstance(v.args[0], (ast.Constant, ast.Starred))):
            return
        mode = ctx.qualified_name(v.func.func)
        if mode not in MODES:
            return
        yield self.report(node, ctx, stmt=ctx.source(v), fn=ctx.source(v.args[0]),
                          mode=ctx.source(v.func))
