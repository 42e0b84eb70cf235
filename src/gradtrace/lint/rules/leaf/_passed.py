"""A leaf that requires grad reaching a function of the file as an argument (GT302)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.rules.registration._modules import owns_params

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def passed_parameter(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, ctx: Context
                      ) -> ast.stmt | None:
    """The call statement passing a Parameter (a torch.nn layer's ``.weight``, an
    ``nn.Parameter``) for parameter ``name`` of the file's function ``fn``, when every call of
    ``fn`` in the file does so with grad enabled (argument values across a call)."""
    if ctx.analysis.functions.get(fn.name) is not fn:
        return None
    vals = ctx.analysis.argument_values(fn, name)
    first: ast.stmt | None = None
    for v, where in vals:
        k = ctx.analysis.kind_in(v, where, v.lineno)
        if not (k is not None and k.what == PARAMETER or _layer_weight(v, where, ctx)):
            return None
        sc = ctx.scope(where)
        st = sc.statement_of(v)
        if st is None or sc.grad_off_at(st) is not None:
            return None
        first = first or st
    return first


def _layer_weight(v: ast.expr, where: ast.AST, ctx: Context) -> bool:
    """``layer.weight`` of a torch.nn layer that owns parameters (``nn.Embedding(...)``)."""
    if not (isinstance(v, ast.Attribute) and v.attr == "weight"):
        return False
    k = ctx.analysis.kind_in(v.value, where, v.lineno)
    return k is not None and k.what == "module" and k.node is not None \
        and (k.cls or "").startswith("torch.nn.") and owns_params(k.node, ctx)
