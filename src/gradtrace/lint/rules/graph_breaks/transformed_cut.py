"""GT149: a function handed to `torch.func.grad` (or another differentiating transform) cuts
everything it returns."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.helper_cuts import cut_away, helper_cut
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

# transforms that differentiate the function they are given: its return is what they derive
TRANSFORMS = frozenset({
    "torch.func.grad", "torch.func.grad_and_value", "torch.func.vjp", "torch.func.jacrev",
    "torch.func.jacfwd", "torch.func.hessian", "functorch.grad", "functorch.grad_and_value",
    "functorch.vjp", "functorch.jacrev", "functorch.jacfwd", "functorch.hessian",
    "torch.autograd.functional.jacobian", "torch.autograd.functional.hessian",
    "torch.autograd.functional.vjp", "torch.autograd.functional.jvp",
    "torch.autograd.functional.hvp", "torch.autograd.functional.vhp",
})


class DifferentiatedFunctionReturnsCut(Rule):
    """A function given to `torch.func.grad` (`grad_and_value`, `vjp`, `jacrev`, `jacfwd`,
    `hessian`, `torch.autograd.functional.*`) returns only values cut from its inputs.

    Why: the transform differentiates what the function returns with respect to its
    arguments. `return torch.as_tensor(loss.item())`, `return loss.detach()` or a value made
    under `no_grad` carries no history, so on torch 2.13 the transform raises nothing and
    returns all-zero gradients: a training loop over them never moves
    (NOTE [helper cuts]: the same reading as a helper that cuts what it returns). Return the
    tensor itself; log a copy.
    Known limits: the function must be a `def` of the file named in the transform's call
    (not a lambda or a `functools.partial`), every `return` cut.
    """

    code = "GT149"
    name = "differentiated-function-returns-cut"
    message = ("`{expr}` cuts what `{fn}` returns, and `{transform}` (line {line}) "
               "differentiates that return: every gradient it gives is zero; return the "
               "tensor itself")
    triggers = ("grad", "jac", "hessian", "vjp", "jvp", "hvp", "vhp")
    examples = [
        Bad("""
            import torch
            from torch.func import functional_call, grad
            def loss_fn(p, x, y):
                pred = functional_call(model, p, (x,))
                return torch.as_tensor(torch.nn.functional.mse_loss(pred, y).item())
            g = grad(loss_fn)(params, x, y)
            """, at=(5, 27)),
        Good("""
            import torch
            from torch.func import functional_call, grad
            def loss_fn(p, x, y):
                return torch.nn.functional.mse_loss(functional_call(model, p, (x,)), y)
            g = grad(loss_fn)(params, x, y)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        q = ctx.qualified_name(node.func) or ""
        if q not in TRANSFORMS or not node.args or not isinstance(node.args[0], ast.Name):
            return
        name = node.args[0].id
        fn = ctx.analysis.functions.get(name)
        b = ctx.scope().binding_before(name, node.lineno)
        if fn is None or b is not None and b.stmt is not fn:
            return  # a local value, not the file's def
        cut = helper_cut(ctx, fn)
        if cut is None or cut_away(ctx, cut.node) is not None:
            return  # (a cut in another file is reported there)
        yield self.report(cut.node, ctx, related=(Related(
            ctx.path, node.lineno, f"`{ctx.source(node.func)}` differentiates `{name}` here",
            ctx.column(node)),), expr=ctx.source(cut.node), fn=name,
            transform=ctx.source(node.func), line=node.lineno)
