"""GT213: an optimizer's `step` runs the training closure with gradients off."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

OPTIMIZER_BASES = frozenset({"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"})


def _optimizer_class(cls: ast.ClassDef | None, ctx: Context, depth: int = 0) -> bool:
    """A subclass of ``torch.optim.Optimizer`` (directly or through classes of the file)."""
    if cls is None or depth > 8:
        return False
    for b in cls.bases:
        if (ctx.qualified_name(b) or "") in OPTIMIZER_BASES:
            return True
        if isinstance(b, ast.Name):
            info = ctx.analysis.classes.get(b.id)
            if info is not None and info.node is not cls \
                    and _optimizer_class(info.node, ctx, depth + 1):
                return True
    return False


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


class ClosureRunUnderNoGrad(Rule):
    """An optimizer's `step(closure)` runs under `no_grad` and calls the closure there.

    Why: the `closure` of `optimizer.step(closure)` recomputes the loss and calls
    `backward()`. Optimizers decorate `step` with `@torch.no_grad()` so that their parameter
    updates are not recorded, and PyTorch's own call the closure inside
    `with torch.enable_grad():` for that reason. A custom optimizer (or a copy of one) that
    calls `closure()` directly runs the training forward with gradients off: `backward()`
    raises `RuntimeError: element 0 of tensors does not require grad and does not have a
    grad_fn` (Lightning-AI/pytorch-lightning#18254 with the old Hugging Face `AdamW`; checked
    on torch 2.13). Call it as `with torch.enable_grad(): loss = closure()`.
    Known limits: the method must be `step` or belong to a `torch.optim.Optimizer` subclass of
    this file, and call one of its own arguments.
    """

    code = "GT213"
    name = "closure-run-under-no-grad"
    message = ("`{call}` runs the training closure under `{mode}` (line {line}): its "
               "forward records no graph and its `backward()` raises `element 0 of tensors "
               "does not require grad`; call it inside `with torch.enable_grad():`")
    triggers = ("no_grad", "inference_mode", "set_grad_enabled")
    gate_statements = "function"
    examples = [
        Bad("""
            import torch
            class SignSGD(torch.optim.Optimizer):
                def __init__(self, params, lr=0.01):
                    super().__init__(params, {"lr": lr})
                @torch.no_grad()
                def step(self, closure=None):
                    loss = closure() if closure is not None else None
                    for g in self.param_groups:
                        for p in g["params"]:
                            p.add_(p.grad.sign(), alpha=-g["lr"])
                    return loss
            """, at=(7, 15)),
        Good("""
            import torch
            class SignSGD(torch.optim.Optimizer):
                def __init__(self, params, lr=0.01):
                    super().__init__(params, {"lr": lr})
                @torch.no_grad()
                def step(self, closure=None):
                    loss = None
                    if closure is not None:
                        with torch.enable_grad():
                            loss = closure()
                    for g in self.param_groups:
                        for p in g["params"]:
                            p.add_(p.grad.sign(), alpha=-g["lr"])
                    return loss
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.class_def
        if cls is None or not (node.name == "step" or _optimizer_class(cls, ctx)):
            return
        params = set(_params(node))
        if not params:
            return
        scope = ctx.scope(node)
        for n in walk(node):
            if isinstance(n, (*FUNCTION_TYPES, ast.Lambda)) and n is not node:
                continue
            if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id in params):
                continue
            stmt = scope.statement_of(n)
            off = scope.grad_off_at(stmt) if stmt is not None else None
            if off is None or any(b.line < n.lineno and b.value is not None
                                  for b in scope.bindings.get(n.func.id, ())):
                continue
            mode = ctx.source(off.func if isinstance(off, ast.Call) else off) \
                if not isinstance(off, ast.With) else ctx.source(off.items[0].context_expr)
            yield self.report(n, ctx, related=[Related(
                ctx.path, off.lineno, "gradients are turned off here", ctx.column(off))],
                call=ctx.source(n), mode=mode, line=off.lineno)
            return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
