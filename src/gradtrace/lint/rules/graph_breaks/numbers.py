"""GT1xx: values that leave the autograd graph on their way to the loss."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import NUMBER, NUMPY
from gradtrace.lint.rule import Bad, Good, Rule


class BackwardOnPythonNumber(Rule):
    """`.backward()` is called on a Python number or NumPy value, not on a tensor.

    Why: `.item()`, `float(t)` and `.tolist()` return plain Python values with no autograd
    history, so they have no `.backward()`: the call raises
    `AttributeError: 'float' object has no attribute 'backward'`. Call `backward()` on the
    tensor, and use `.item()` only for logging.
    Known limits: follows names within one function.
    """

    code = "GT101"
    name = "backward-on-python-number"
    message = "`{expr}` is a Python {what}, not a tensor: it has no `.backward()`"
    fix_title = "Call `.backward()` on the tensor itself"
    fix_safety = "safe"
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.item().backward()
            """, fixed="""
            import torch
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            """, at=(3, 0)),
        Bad("""
            import torch
            def step(model, x, y, opt):
                loss = float(torch.nn.functional.mse_loss(model(x), y))
                loss.backward()
            """, at=(4, 4)),
        Good("""
            import torch
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            print(loss.item())
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr == "backward"):
            return
        recv = func.value
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Attribute) \
                and recv.func.attr == "item" and not recv.args:
            fix = self.fix(ctx.edit(recv, ctx.source(recv.func.value)))
            yield self.report(node, ctx, fix=fix, expr=ctx.source(recv), what="float")
            return
        scope = ctx.scope()
        kind = scope.kind(recv)
        if kind in (NUMBER, NUMPY):
            related = ()
            name = ctx.source(recv)
            b = scope.binding_before(name, node.lineno)
            if b is not None:
                related = (Related(ctx.path, b.line, f"`{name}` became a Python value here",
                                   ctx.column(b.stmt)),)
            what = "number" if kind == NUMBER else "NumPy value"
            yield self.report(node, ctx, related=related, expr=name, what=what)
