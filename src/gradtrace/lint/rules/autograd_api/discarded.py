"""GT708: the result of an out-of-place tensor operation is dropped (the tensor is unchanged)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import BUFFER, PARAMETER, TENSOR
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule

# Tensor operations that return a new tensor and have an in-place twin spelled with a trailing
# underscore (``clamp`` / ``clamp_``): called as a statement of its own, the new tensor is
# dropped and the receiver is left as it was.
PURE_WITH_INPLACE = frozenset({
    "clamp", "clip", "clamp_min", "clamp_max", "add", "sub", "mul", "div", "neg", "abs",
    "sqrt", "exp", "log", "pow", "sign", "sigmoid", "tanh", "relu", "floor", "ceil", "round",
    "masked_fill", "index_fill", "index_add", "scatter", "scatter_add", "renorm", "lerp",
    "addcmul", "addcdiv", "nan_to_num", "fmod", "remainder", "reciprocal", "square",
    "true_divide", "multiply", "subtract", "divide", "fill_diagonal", "zero"})


def _tensor_receiver(expr: ast.AST, ctx: Context) -> bool:
    """``p.grad``, ``p.grad.data``, ``w.data``, or a name whose binding is a tensor."""
    if isinstance(expr, ast.Attribute) and expr.attr in ("grad", "data"):
        return True
    try:
        return ctx.scope().kind(expr) in (TENSOR, PARAMETER, BUFFER)
    except Exception:  # pragma: no cover - an expression the scope cannot place
        return False


class TensorOpResultDiscarded(Rule):
    """An out-of-place tensor operation (`t.clamp(-1, 1)`, `torch.clamp(g, -1, 1)`,
    `p.grad.mul(0.5)`) written as a statement of its own: its result is thrown away.

    Why: these operations return a new tensor and leave their input as it is; only the
    in-place twin with a trailing underscore (`clamp_`, `mul_`) or an assignment changes the
    value. The DQN tutorial's `param.grad.data.clamp(-1, 1)` never clipped a gradient: the
    optimizer steps with the unclipped ones, and nothing fails. Use `clamp_` (or assign the
    result back). Known limits: the receiver must be seen to be a tensor (`.grad`, `.data`, a
    parameter, a tensor made in the file) or the call a `torch.` function.
    """

    code = "GT708"
    name = "tensor-op-result-discarded"
    message = ("`{call}` returns a new tensor and leaves `{target}` unchanged; as a statement of "
               "its own its result is thrown away, so the {what} never happens: use the "
               "in-place `{method}_` or assign the result")
    triggers = tuple(sorted(PURE_WITH_INPLACE))
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def clip(model, opt):
                for p in model.parameters():
                    p.grad.data.clamp(-1, 1)
                opt.step()
            """, at=(5, 8)),
        Bad("""
            import torch

            def shrink(weights):
                for w in weights:
                    torch.clamp(w.grad, min=-5.0, max=5.0)
            """, at=(5, 8)),
        Good("""
            import torch

            def clip(model, opt):
                for p in model.parameters():
                    p.grad.data.clamp_(-1, 1)
                opt.step()
            """),
        Good("""
            import torch

            def shrink(weights):
                for w in weights:
                    w.grad = torch.clamp(w.grad, min=-5.0, max=5.0)
            """),
    ]

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        call = node.value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            return
        method = call.func.attr
        if method not in PURE_WITH_INPLACE or any(k.arg == "out" for k in call.keywords):
            return
        qual = ctx.qualified_name(call.func) or ""
        if qual == f"torch.{method}":
            if not call.args:
                return
            target = call.args[0]
        elif not qual.startswith("torch.") and _tensor_receiver(call.func.value, ctx):
            target = call.func.value
        else:
            return
        what = "clipping" if method in ("clamp", "clip", "clamp_min", "clamp_max") else \
            "update"
        yield self.report(node, ctx, call=ctx.source(call)[:60], target=dotted(target) or
                          ctx.source(target)[:40], what=what, method=method)
