"""GT769: a clamp's upper bound `1 - eps` that is exactly 1.0 in the tensor's dtype, before
`log(1 - p)` / `log1p(-p)`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says
from gradtrace.lint.rules.numerics._bounds import bounds, num
from gradtrace.lint.rules.numerics._ops import in_training, strip, torch_op
from gradtrace.lint.rules.numerics._rounding import one_minus_is_one, small_setting_value

# the half dtypes a file can put its tensors in, by the words that do it
HALF_WORDS = {"bfloat16": ("bfloat16",), "float16": ("float16", ".half()")}
CASTS = {"float": "float32", "double": "float64"}
WIDTHS = {"float32": "float32", "float": "float32", "float64": "float64", "double": "float64"}
WIDE_WORDS = ("float64", ".double()", "set_default_dtype")


def _cast_to(e: ast.AST) -> str | None:
    """The float dtype the operand is cast to on its way to the clamp (``p.float()``,
    ``p.to(torch.float64)``), or None."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        attr = e.func.attr
        if attr in CASTS:
            return CASTS[attr]
        if attr == "to":
            for a in [*e.args, *(k.value for k in e.keywords)]:
                name = a.attr if isinstance(a, ast.Attribute) else None
                if name in WIDTHS:
                    return WIDTHS[name]
        e = e.func.value
    return None


def _one_minus(e: ast.AST | None) -> ast.expr | None:
    """``c`` of ``1 - c`` / ``1.0 - c``."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and num(e.left) == 1.0:
        return e.right
    return None


def _log_of_complement(call: ast.Call, ctx: Context) -> ast.AST | None:
    """``p`` of ``log(1 - p)`` / ``log1p(-p)`` (casts and views of ``p`` stripped)."""
    got = torch_op(call, ctx)
    if got is None:
        return None
    op, arg = got
    if op == "log":
        inner = _one_minus(arg)
        return strip(inner) if inner is not None else None
    if op == "log1p" and isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
        return strip(arg.operand)
    return None


def _logs_reading(stmts: list[ast.stmt], clamp: ast.Call, target: str | None,
                  ctx: Context) -> ast.Call | None:
    """The first ``log(1 - p)`` of ``stmts`` whose ``p`` is the clamp itself or the name it
    is bound to (followed through rebindings by casts and views: ``p = p.unsqueeze(1)``)."""
    names = {target} if target else set()
    for s in stmts:
        for n in walk(s):
            if isinstance(n, ast.Call):
                p = _log_of_complement(n, ctx)
                if p is clamp or isinstance(p, ast.Name) and p.id in names:
                    return n
        if s is not stmts[0] and isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name):
            t = s.targets[0].id
            v = strip(s.value)
            if isinstance(v, ast.Name) and v.id in names:
                names.add(t)
            else:
                names.discard(t)
    return None


class ClampBoundRoundsToOne(Rule):
    """`p.clamp(eps, 1 - eps)` before `log(1 - p)`, with `1 - eps` exactly 1.0 in the dtype.

    Why: float32 has no number between 1 - 6e-8 and 1, bfloat16 none between 1 - 0.004 and
    1, float16 none between 1 - 0.0005 and 1: `1 - 1e-8` in float32 (`1 - 1e-6` in
    bfloat16) is 1.0 once the clamp casts it to the tensor's dtype, so the clamp leaves a
    saturated probability (a sigmoid at exactly 1.0) at 1.0. Then `log(1 - p)` is -inf:
    the loss is NaN (`0 * -inf` for the other label) or, when the forward stays finite, its
    backward multiplies by an infinite derivative and every parameter upstream gets NaN
    gradients (NVIDIA/apex#358, GLiNER2#155; checked on torch 2.13). Use an epsilon the
    dtype can hold (`1e-7` and above in float32, `1e-2` in bfloat16), add it inside the log
    (`log(1 - p + eps)`), or compute from logits (`F.logsigmoid(-z)`,
    `binary_cross_entropy_with_logits`).
    Known limits: the bound is written `1 - eps` with `eps` a number, an argument default,
    a module constant or `self.eps` set from one; the half dtypes count when the file names
    them; the clamped value reaches `log(1 - p)` / `log1p(-p)` in the same function and is
    differentiated there (a loss, a `forward`, before a `backward()`).
    """

    code = "GT769"
    gate_statements = True
    name = "clamp-bound-rounds-to-one"
    message = ("the upper bound `1 - {eps}` is exactly 1.0 in {dtype}: the clamp leaves a "
               "saturated `{p}` at 1.0, and the log of `1 - {p}` here is -inf (NaN loss or NaN "
               "gradients)")
    triggers = ("clamp", "clip")
    examples = [
        Bad("""
            import torch
            def bce(p, y, eps=1e-8):
                p = torch.clamp(p, eps, 1 - eps)
                return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
            bce(torch.sigmoid(model(x)), y).backward()
            """, at=(4, 42)),
        Good("""
            import torch
            def bce(p, y, eps=1e-7):
                p = torch.clamp(p, eps, 1 - eps)
                return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
            bce(torch.sigmoid(model(x)), y).backward()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = bounds(node, ctx)
        if got is None or got[0] not in ("clamp", "clip", "clamp_max"):
            return
        c = _one_minus(got[2])
        eps = small_setting_value(c, ctx) if c is not None else None
        if eps is None:
            return
        dtype = self._dtype(eps, ctx, _cast_to(torch_op(node, ctx)[1]))
        if dtype is None:
            return
        stmt = ctx.statement
        scope = ctx.scope()
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name) and strip(stmt.value) is node:
            target = stmt.targets[0].id
        after = [s for s in scope.stmts if s.lineno >= stmt.lineno]
        log = _logs_reading(after, node, target, ctx)
        if log is None or not in_training(ctx, node):
            return
        p = target or ctx.source(torch_op(node, ctx)[1])
        related = [Related(ctx.path, node.lineno, "the clamp")] if log.lineno != node.lineno \
            else []
        yield self.report(log, ctx, related=related, eps=f"{eps:g}", dtype=dtype, p=p)

    @staticmethod
    def _dtype(eps: float, ctx: Context, cast: str | None) -> str | None:
        if cast == "float64":
            return None
        if one_minus_is_one(eps, "float32") and not any(file_says(ctx, w) for w in WIDE_WORDS):
            return "float32"
        if cast == "float32":
            return None
        for dtype, words in HALF_WORDS.items():
            if any(file_says(ctx, w) for w in words) and one_minus_is_one(eps, dtype):
                return dtype
        return None
