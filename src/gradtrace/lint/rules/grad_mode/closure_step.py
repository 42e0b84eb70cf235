"""GT213: an optimizer's `step` runs the training closure with gradients off."""
from __future__ import annotations

import ast
import builtins
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.steps import backward_of
from gradtrace.lint.analysis.torch_classes import optimizer_subclass
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


# a closure that only reads a value: ``lambda: float(loss)``, ``lambda: loss.item()``
READERS = frozenset({"item", "tolist"})


def _reads_only(fn: ast.AST, ctx: Context) -> bool:
    """``fn`` (a lambda or a ``def`` of the file) calls no backward and nothing that could
    (only builtins of Python and ``.item()``): it returns a value, it does not train."""
    for n in walk(fn):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr in READERS and not n.args:
            continue
        if isinstance(f, ast.Name) and hasattr(builtins, f.id) and f.id not in \
                ctx.analysis.functions and f.id not in ctx.analysis.classes \
                and f.id not in ctx.imports.aliases:
            continue
        return False
    return not any(isinstance(n, ast.Call) and backward_of(n, ctx) for n in walk(fn))


def _value_closures_only(node: ast.FunctionDef | ast.AsyncFunctionDef, param: str,
                         index: int, ctx: Context) -> bool:
    """Every ``<x>.<step>(closure)`` of the file passes a closure that does not train
    (``optimizer.step(lambda: float(loss_value))`` after ``loss_value.backward()``), and
    there is at least one such call."""
    seen = False
    for call, _, _ in call_sites(ctx, node.name):
        if not isinstance(call.func, ast.Attribute):
            continue
        arg = call.args[index] if len(call.args) > index else next(
            (k.value for k in call.keywords if k.arg == param), None)
        if arg is None:
            continue
        if isinstance(arg, ast.Name):
            arg = ctx.analysis.functions.get(arg.id)  # type: ignore[assignment]
        if not isinstance(arg, (ast.Lambda, *FUNCTION_TYPES)) or not _reads_only(arg, ctx):
            return False
        seen = True
    return seen


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
    Nothing is said when every call of the method in the file hands it a closure that only
    reads a value (`opt.step(lambda: float(loss))` after `loss.backward()`).
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
        Good("""
            import torch
            class SignSGD(torch.optim.Optimizer):
                def __init__(self, params, lr=0.01):
                    super().__init__(params, {"lr": lr})
                @torch.no_grad()
                def step(self, closure):
                    loss = float(closure())
                    for g in self.param_groups:
                        for p in g["params"]:
                            p.add_(p.grad.sign(), alpha=-g["lr"])
                    return loss
            net = torch.nn.Linear(3, 1)
            opt = SignSGD(net.parameters())
            loss = net(torch.randn(4, 3)).pow(2).mean()
            loss.backward()
            opt.step(lambda: float(loss))
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.class_def
        if cls is None or not (node.name == "step" or optimizer_subclass(cls, ctx)):
            return
        names = _params(node)
        params = set(names)
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
            if _value_closures_only(node, n.func.id, names.index(n.func.id), ctx):
                return
            mode = ctx.source(off.func if isinstance(off, ast.Call) else off) \
                if not isinstance(off, ast.With) else ctx.source(off.items[0].context_expr)
            yield self.report(n, ctx, related=[Related(
                ctx.path, off.lineno, "gradients are turned off here", ctx.column(off))],
                call=ctx.source(n), mode=mode, line=off.lineno)
            return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
