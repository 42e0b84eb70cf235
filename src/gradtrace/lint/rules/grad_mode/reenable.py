"""GT208: gradient code that turns grad back on with `enable_grad` inside `inference_mode`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.context import FUNCTION_TYPES, Context, grad_mode_of
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

GRADIENT_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward",
                            "torch.autograd.functional.jacobian",
                            "torch.autograd.functional.hessian",
                            "torch.autograd.functional.vjp", "torch.autograd.functional.jvp",
                            "torch.autograd.functional.hvp", "torch.autograd.functional.vhp"})
HOPS = 2  # calls followed from the inference_mode block


def _computes_gradient(nodes: list[ast.stmt], ctx: Context) -> bool:
    for s in nodes:
        for n in walk(s):
            if isinstance(n, ast.Call) and (
                    isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
                    or (ctx.qualified_name(n.func) or "") in GRADIENT_CALLS):
                return True
    return False


def _reenabling(ctx: Context, fn: ast.AST) -> ast.AST | None:
    """The ``with torch.enable_grad():`` (or ``set_grad_enabled(True)``, or an
    ``@torch.enable_grad()`` decorator of ``fn``) under which ``fn`` computes a gradient."""
    def make() -> list[ast.AST]:
        for d in getattr(fn, "decorator_list", ()):
            if grad_mode_of(d, ctx.imports) == "on" and _computes_gradient(fn.body, ctx):  # type: ignore[attr-defined]
                return [d]
        for n in walk(fn):
            if isinstance(n, (ast.With, ast.AsyncWith)) and any(
                    grad_mode_of(i.context_expr, ctx.imports) == "on" for i in n.items) \
                    and _computes_gradient(n.body, ctx):
                return [n]
        return []
    got = ctx.memo("gt208-reenable", fn, make)
    return got[0] if got else None


def _reenabled_below(ctx: Context, where: ast.AST, body: list[ast.stmt], hops: int
                     ) -> tuple[ast.AST, ast.Call | None] | None:
    """(the re-enabling node, the call in ``body`` that reaches it, None when inline)."""
    for s in body:
        got = _reenabling(ctx, s) if not isinstance(s, FUNCTION_TYPES) else None
        if got is not None:
            return got, None
    for s in body:
        for n in walk(s):
            if not isinstance(n, ast.Call):
                continue
            target = resolve(ctx, where, n)
            if target is None:
                continue
            fn = target[0]
            inner = _reenabling(ctx, fn)
            if inner is None and hops > 1:
                deeper = _reenabled_below(ctx, fn, fn.body, hops - 1)
                inner = deeper[0] if deeper else None
            if inner is not None:
                return inner, n
    return None


class EnableGradInsideInferenceMode(Rule):
    """Code run under `torch.inference_mode()` turns grad back on with `torch.enable_grad()`
    to take a gradient: `enable_grad` cannot undo `inference_mode`.

    Why: inside `inference_mode`, `enable_grad()` (and `set_grad_enabled(True)`) do not turn
    recording back on (pytorch-facts.md#grad-mode-nesting): nothing computed there gets a
    `grad_fn`, and the gradient call (a Jacobian or input gradient taken in a test or
    validation step, an attack, a physics residual) raises `RuntimeError: element 0 of tensors
    does not require grad and does not have a grad_fn` (Lightning-AI/pytorch-lightning#19910,
    checked on torch 2.13). Run that loop under `torch.no_grad()`, inside which `enable_grad`
    works, or wrap the gradient code in `torch.inference_mode(False)`.
    Known limits: the gradient code must be inline or in a function or method of this file,
    at most two calls below the `inference_mode` block.
    """

    code = "GT208"
    name = "enable-grad-inside-inference-mode"
    message = ("`{mode}` covers {via}`{enable}` (line {line}), which turns grad back on to "
               "take a gradient: `enable_grad` cannot re-enable grad inside `inference_mode`, "
               "so the gradient call raises `element 0 of tensors does not require grad`; use "
               "`torch.no_grad()` here (or `torch.inference_mode(False)` around the gradient "
               "code)")
    triggers = ("inference_mode",)
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def input_gradients(model, batch):
                with torch.enable_grad():
                    x = batch.clone().requires_grad_(True)
                    return torch.autograd.grad(model(x).sum(), x)[0]

            def run_test_loop(model, batches):
                with torch.inference_mode():
                    return [input_gradients(model, b) for b in batches]
            """, at=(9, 4)),
        Good("""
            import torch

            def input_gradients(model, batch):
                with torch.enable_grad():
                    x = batch.clone().requires_grad_(True)
                    return torch.autograd.grad(model(x).sum(), x)[0]

            def run_test_loop(model, batches):
                with torch.no_grad():
                    return [input_gradients(model, b) for b in batches]
            """),
        Good("""
            import torch

            def evaluate(model, batches):
                with torch.inference_mode():
                    return [model(b).argmax(-1) for b in batches]
            """),
    ]

    def visit_With(self, node: ast.With, ctx: Context) -> Iterator[Finding]:
        mode = next((i.context_expr for i in node.items
                     if grad_mode_of(i.context_expr, ctx.imports) == "inference"), None)
        if mode is not None:
            yield from self._check(node, mode, node.body, ctx.function or ctx.tree, ctx)

    visit_AsyncWith = visit_With

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        mode = next((d for d in node.decorator_list
                     if grad_mode_of(d, ctx.imports) == "inference"), None)
        if mode is not None:
            yield from self._check(mode, mode, node.body, node, ctx)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _check(self, at: ast.AST, mode: ast.AST, body: list[ast.stmt], where: ast.AST,
               ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("enable_grad", "set_grad_enabled"):
            return  # nothing in this file can turn grad back on
        got = _reenabled_below(ctx, where, body, HOPS)
        if got is None:
            return
        enable, call = got
        head = enable.items[0].context_expr if isinstance(enable, (ast.With, ast.AsyncWith)) \
            else enable
        via = f"`{ctx.source(call.func)}(...)`, which runs " if call is not None else ""
        yield self.report(at, ctx, related=(Related(
            ctx.path, enable.lineno, "grad is turned back on here", ctx.column(enable)),),
            mode=ctx.source(mode), via=via, enable=ctx.source(head), line=enable.lineno)
