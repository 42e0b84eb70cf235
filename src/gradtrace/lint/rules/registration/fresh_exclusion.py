"""GT467: a parameter left out of the optimizer by identity against a computed tensor."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.fresh_tensors import fresh_tensor
from gradtrace.lint.analysis.params import PARAM_ITERS
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule


def _params_call(e: ast.AST) -> bool:
    """``m.parameters()``, or ``set``/``list`` of it."""
    if isinstance(e, ast.Call) and dotted(e.func) in ("set", "list", "frozenset") \
            and len(e.args) == 1:
        e = e.args[0]
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
        and e.func.attr in PARAM_ITERS


def _set_elements(e: ast.AST) -> list[ast.expr] | None:
    """Elements of ``{a, b}`` / ``set([a, b])`` / ``set((a,))``."""
    if isinstance(e, ast.Set):
        return list(e.elts)
    if isinstance(e, ast.Call) and dotted(e.func) in ("set", "frozenset") and len(e.args) == 1 \
            and isinstance(e.args[0], (ast.List, ast.Tuple)):
        return list(e.args[0].elts)
    return None


class ParameterExcludedByComputedTensor(Rule):
    """A parameter is taken out of a collection by identity against a tensor computed from
    it: nothing is taken out.

    Why: `set(model.parameters()) - {model.kernel.lengthscale}`, `[p for p in
    model.parameters() if p is not model.scale]` and `p not in {...}` compare tensor objects
    (a set hashes a tensor by its identity). When the excluded value is computed each time it
    is read (a `@property` returning `F.softplus(self.raw_lengthscale)`, `w.data`,
    `w.detach()`), it is never one of the parameters, the exclusion removes nothing, and the
    parameter meant to stay fixed is optimised (cornellius-gp/gpytorch#1131; checked on torch
    2.13). Exclude the raw parameter itself (`model.kernel.raw_lengthscale`), or freeze it
    with `requires_grad_(False)`.
    Known limits: the collection is `model.parameters()` (or `set`/`list` of it) in a set
    difference or a comprehension; a property counts when every class of the file defining
    that name computes it and nothing stores an attribute of that name.
    """

    code = "GT467"
    gate_statements = True
    name = "parameter-excluded-by-computed-tensor"
    message = ("`{excluded}` is never one of the parameters ({how}): excluding it by identity "
               "removes nothing, and the parameter it is computed from is still {where}")
    triggers = ("parameters()",)
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F
            class Kernel(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.raw_lengthscale = torch.nn.Parameter(torch.zeros(1))
                @property
                def lengthscale(self):
                    return F.softplus(self.raw_lengthscale)
            kernel = Kernel()
            opt = torch.optim.Adam(list(set(kernel.parameters()) - {kernel.lengthscale}))
            """, at=(11, 28)),
        Bad("""
            params = [p for p in model.parameters() if p is not model.head.weight.data]
            """, at=(1, 43)),
        Good("""
            opt = torch.optim.Adam(list(set(model.parameters()) - {model.kernel.raw_lengthscale}))
            params = [p for p in model.parameters() if p is not model.head.weight]
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.op, ast.Sub) or not _params_call(node.left):
            return
        for e in _set_elements(node.right) or ():
            how = fresh_tensor(e, ctx)
            if how is not None:
                yield self.report(node, ctx, excluded=ctx.source(e), how=how,
                                  where="in the set")
                return

    def visit_comprehension(self, node: ast.comprehension, ctx: Context
                            ) -> Iterator[Finding]:
        if not _params_call(node.iter):
            return
        var = node.target
        if isinstance(var, ast.Tuple) and len(var.elts) == 2:
            var = var.elts[1]
        if not isinstance(var, ast.Name):
            return
        for test in node.ifs:
            for c in walk(test):
                if not (isinstance(c, ast.Compare) and len(c.ops) == 1
                        and isinstance(c.left, ast.Name) and c.left.id == var.id):
                    continue
                op, right = c.ops[0], c.comparators[0]
                if isinstance(op, ast.IsNot):
                    elts = [right]
                elif isinstance(op, ast.NotIn):
                    elts = _set_elements(right) or []
                else:
                    continue
                for e in elts:
                    how = fresh_tensor(e, ctx)
                    if how is not None:
                        yield self.report(c, ctx, excluded=ctx.source(e), how=how,
                                          where="kept")
                        return
