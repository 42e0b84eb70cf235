"""GT604: ``torch.<op>(..., out=p)`` writing into a Parameter (or requires-grad tensor) with
grad enabled."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.kinds import PARAMETER, TENSOR
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule


def _needs_grad(e: ast.expr, ctx: Context) -> bool:
    k = ctx.analysis.kind(e, None, e.lineno)
    return k is not None and (k.what == PARAMETER and not _made_frozen(k.node, e, ctx)
                              or k.what == TENSOR and bool(k.requires_grad))


def _made_frozen(made: ast.AST | None, e: ast.expr, ctx: Context) -> bool:
    """``Parameter(t, requires_grad=False)``, a buffer kept as a Parameter for checkpoints,
    never switched on in the file (no ``<name>.requires_grad_(`` or ``.requires_grad = True``):
    an ``out=`` write into it is no autograd write."""
    if not isinstance(made, ast.Call) or not any(
            k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in made.keywords):
        return False
    name = ctx.source(e)
    return f"{name}.requires_grad_(" not in ctx.code and f"{name}.requires_grad = True" \
        not in ctx.code


def _callers_all_grad_off(ctx: Context, fn: ast.AST | None) -> bool:
    """Every call of ``fn`` in the file (there is at least one) runs with grad disabled."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    sites = [(c, outer) for c, _s, outer in call_sites(ctx, fn.name)
             if not (fn.lineno <= c.lineno <= (fn.end_lineno or 0))]
    if not sites:
        return False
    for call, outer in sites:
        where = next((o for o in reversed(outer)
                      if isinstance(o, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if ctx.scope(where or ctx.tree).grad_off_at(call) is None:
            return False
    return True


# factories that, given `out=` a requires-grad tensor under no_grad, silently clear its
# requires_grad (checked one by one on torch 2.13; `torch.add(..., out=p)` keeps it)
CLEARING_FACTORIES = frozenset({"arange", "range", "linspace", "logspace", "rand", "zeros",
                                "ones", "full", "normal"})
RAISES = ("PyTorch raises `RuntimeError: functions with out=... arguments don't support "
          "automatic differentiation, but one of the arguments requires grad`")
CLEARS = ("under no_grad it silently sets `{out}.requires_grad` to False, so it is never "
          "trained")


def _regrads_after(ctx: Context, out: str, line: int) -> bool:
    """``out.requires_grad_()`` / ``out.requires_grad = True`` later in the same function."""
    fn = ctx.function
    end = fn.end_lineno if fn is not None else len(ctx.code_lines)
    text = "\n".join(ctx.code_lines[line:end])
    return f"{out}.requires_grad_(" in text or f"{out}.requires_grad = True" in text


class OutArgumentRequiresGrad(Rule):
    """`torch.arange(..., out=self.freq)` writes into a Parameter (a tensor that requires
    grad).

    Why: functions with an `out=` argument are not differentiable, and with grad enabled
    PyTorch refuses them when one of their arguments, the `out` tensor included, requires
    grad: `RuntimeError: aten::arange(): functions with out=... arguments don't support
    automatic differentiation, but one of the arguments requires grad.` A `reset_parameters()`
    that fills a Parameter this way crashes the constructor. Under `torch.no_grad()` the
    factories (`arange`, `linspace`, `zeros`, `ones`, `full`, `rand`, `normal`...) accept it
    but set the Parameter's `requires_grad` to False: it silently stops training (both
    checked on torch 2.13). Fill it in place instead: `with torch.no_grad():
    self.freq.copy_(torch.arange(...))`, or call `self.freq.requires_grad_()` afterwards.
    Known limits: the `out` tensor must be known to be a Parameter or a tensor made with
    `requires_grad=True` in this file.
    """

    code = "GT604"
    name = "out-argument-requires-grad"
    message = ("`out={out}` writes into a tensor that requires grad: {consequence}; fill it "
               "in place under `torch.no_grad()` instead (`{out}.copy_(...)`)")
    triggers = ("out=", "out =")
    gate_statements = True
    examples = [
        Bad("""
            import math
            import torch
            import torch.nn as nn

            class Basis(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.freq = nn.Parameter(torch.empty(n))
                    self.reset_parameters()

                def reset_parameters(self):
                    torch.arange(1, self.freq.numel() + 1, out=self.freq).mul_(math.pi)
            """, at=(12, 8)),
        Good("""
            import math
            import torch
            import torch.nn as nn

            class Basis(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.freq = nn.Parameter(torch.empty(n))
                    self.reset_parameters()

                def reset_parameters(self):
                    with torch.no_grad():
                        torch.arange(1, self.freq.numel() + 1, out=self.freq).mul_(math.pi)
                    self.freq.requires_grad_()
            """),
        Good("""
            import torch

            buf = torch.empty(4)
            torch.arange(4, out=buf)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        out = next((k.value for k in node.keywords if k.arg == "out"), None)
        if out is None or not isinstance(out, (ast.Name, ast.Attribute)) \
                or not _needs_grad(out, ctx):
            return
        name = ctx.source(out)
        if ctx.grad_disabled is None and not _callers_all_grad_off(ctx, ctx.function):
            yield self.report(node, ctx, out=name, consequence=RAISES)
            return
        q = ctx.qualified_name(node.func) or ""
        if q.startswith("torch.") and q.rpartition(".")[2] in CLEARING_FACTORIES \
                and not _regrads_after(ctx, name, node.end_lineno or node.lineno):
            yield self.report(node, ctx, out=name, consequence=CLEARS.format(out=name))
