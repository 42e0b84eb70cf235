"""GT705: an old-style `autograd.Function` (non-static `forward`) instantiated and called."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.autograd_api.functions import (
    _is_function_class, _method, only_called_directly)
from gradtrace.lint.nodes import bfs_walk


def _static(fn: ast.FunctionDef, ctx: Context) -> bool:
    return any((ctx.qualified_name(d) or "") in ("staticmethod", "classmethod")
               or isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
               for d in fn.decorator_list)


def _own_call(node: ast.ClassDef) -> bool:
    """The class defines `__call__` without reaching `super()`: calling an instance runs that
    method (a plain call of `forward`), never `Function`'s legacy path."""
    call = _method(node, "__call__")
    return call is not None and not any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super"
        for n in ast.walk(call))


class LegacyAutogradFunctionCalled(Rule):
    """A custom `autograd.Function` with a non-static `forward`, used as an instance
    (`GradReverse()(x)`, or an instance kept on `self` and called).

    Why: since PyTorch 1.5 a Function is never instantiated: `forward`/`backward` are static
    methods that take `ctx`, and it runs through `Fn.apply(x)`. Calling an instance raises
    `RuntimeError: Legacy autograd function with non-static forward method is deprecated.
    Please use new-style autograd function with static forward method.` (checked on torch
    2.13; the instance itself only warns). Code written for PyTorch 0.x (gradient reversal
    layers keeping a coefficient on `self`) fails this way: make `forward(ctx, x, coeff)` and
    `backward(ctx, grad)` static, keep state on `ctx`, and call `Fn.apply(x, coeff)`.
    A class that defines its own `__call__` (not through `super()`) is not reported: calling
    the instance runs that method; nor one whose instances only run a method as a plain
    method (`Dice().forward(a, b)`: no instance is called, the instance only warns). Known limits: the class must be instantiated in the same
    file.
    """

    code = "GT705"
    name = "legacy-autograd-function-called"
    message = ("`{cls}.forward` is not a static method and `{cls}` is instantiated (line "
               "{line}): calling the instance raises `RuntimeError: Legacy autograd function "
               "with non-static forward method is deprecated`; make `forward(ctx, ...)` and "
               "`backward(ctx, ...)` `@staticmethod`s and call `{cls}.apply(...)`")
    triggers = ("Function",)
    gate_statements = True
    examples = [
        Bad("""
            import torch

            class GradReverse(torch.autograd.Function):
                def forward(self, x):
                    return x.view_as(x)

                def backward(self, grad_output):
                    return -grad_output

            def reverse(x):
                return GradReverse()(x)
            """, at=(4, 4)),
        Good("""
            import torch

            class GradReverse(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.view_as(x)

                @staticmethod
                def backward(ctx, grad_output):
                    return -grad_output

            def reverse(x):
                return GradReverse.apply(x)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        if not _is_function_class(node, ctx):
            return
        fwd = _method(node, "forward")
        if fwd is None or _static(fwd, ctx) or _own_call(node) or only_called_directly(node, ctx):
            return
        for call, _s, _outer in call_sites(ctx, node.name):
            if not isinstance(call.func, ast.Name) or node.lineno <= call.lineno \
                    <= (node.end_lineno or 0):
                continue
            parent_apply = any(
                isinstance(a, ast.Attribute) and a.value is call and a.attr == "apply"
                for a in bfs_walk(_s))
            if parent_apply:
                continue
            yield self.report(fwd, ctx, related=(Related(
                ctx.path, call.lineno, "an instance is made here", ctx.column(call)),),
                cls=node.name, line=call.lineno)
            return
