"""GT759: scores filled with +inf (not -inf) before a softmax: every row holding one is NaN."""
from __future__ import annotations

import ast
import math
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.numerics._ops import strip, torch_op
from gradtrace.lint.rules.numerics.softmax import _softmax

FILLS = frozenset({"masked_fill", "masked_fill_"})
INF_NAMES = frozenset({"math.inf", "numpy.inf", "torch.inf", "numpy.Inf", "numpy.PINF"})
SOFTMAXES = frozenset({"softmax", "log_softmax"})


def _sign_of_inf(e: ast.AST, ctx: Context) -> int:
    """+1 / -1 when ``e`` is a constant infinity (``float('inf')``, ``-float('-inf')``,
    ``math.inf``, ``-torch.inf``...), 0 otherwise."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        inner = _sign_of_inf(e.operand, ctx)
        return -inner if isinstance(e.op, ast.USub) else inner
    if isinstance(e, ast.Constant) and isinstance(e.value, float) and math.isinf(e.value):
        return 1 if e.value > 0 else -1
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "float" \
            and len(e.args) == 1 and isinstance(e.args[0], ast.Constant) \
            and isinstance(e.args[0].value, str):
        try:
            v = float(e.args[0].value)
        except ValueError:
            return 0
        return 0 if not math.isinf(v) else (1 if v > 0 else -1)
    if isinstance(e, (ast.Name, ast.Attribute)) and (ctx.qualified_name(e) or "") in INF_NAMES:
        return 1
    return 0


def _fill(call: ast.Call, ctx: Context) -> tuple[ast.AST, ast.AST] | None:
    """(the tensor filled, the fill value) of ``x.masked_fill(m, v)`` / ``x.masked_fill_(m, v)``
    / ``torch.masked_fill(x, m, v)``."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr not in FILLS:
        return None
    args = list(call.args) + [k.value for k in call.keywords if k.arg == "value"]
    if (ctx.qualified_name(f) or "").startswith("torch.") and len(args) >= 3:
        return args[0], args[2]
    return (f.value, args[1]) if len(args) >= 2 else None


def _softmax_operand(call: ast.Call, ctx: Context) -> ast.AST | None:
    """The input of a softmax / log_softmax call (a function, a method, an ``nn.Softmax``)."""
    got = torch_op(call, ctx)
    if got is not None and got[0] in SOFTMAXES:
        return got[1]
    if _softmax(call, ctx) is not None and call.args:
        return call.args[0]
    return None


class PositiveInfinityIntoSoftmax(Rule):
    """Scores are filled with `+inf` where they should be `-inf`, then go through a softmax.

    Why: a masked position must get `-inf` so that `exp` makes it 0. Filled with `+inf`
    (`-float('-inf')`, `float('inf')`, `math.inf`), the row's maximum is `inf`, and softmax
    computes `exp(inf - inf)`: every row that holds a masked position is NaN, and so are the
    loss and every gradient (memory-compressed-attention#2). Nothing fails: the optimizer
    writes NaN into the weights. Fill with `float('-inf')` (or `torch.finfo(x.dtype).min`).
    Known limits: `masked_fill` / `masked_fill_` with a constant infinity, whose result (or
    the tensor it fills in place) is the softmax's input in the same function.
    """

    code = "GT759"
    name = "positive-infinity-into-softmax"
    message = ("`{fill}` fills the masked scores with +inf, and the softmax at line {line} "
               "then computes inf - inf: every row holding a masked position is NaN, and so "
               "are the loss and the gradients; fill with float('-inf')")
    triggers = ("masked_fill",)
    examples = [
        Bad("""
            import torch

            def attend(q, k, mask):
                scores = q @ k.transpose(-2, -1)
                scores = scores.masked_fill(mask, float("inf"))
                return scores.softmax(dim=-1)
            """, at=(5, 13)),
        Good("""
            import torch

            def attend(q, k, mask):
                scores = q @ k.transpose(-2, -1)
                scores = scores.masked_fill(mask, -float("inf"))
                return scores.softmax(dim=-1)
            """),
        Good("""
            import torch

            def nearest(d, same):
                d = d.masked_fill(same, float("inf"))
                return d.min(dim=1).values
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        got = _fill(node, ctx)
        if got is None or _sign_of_inf(got[1], ctx) != 1:
            return
        sm = softmax_reading(node, strip(got[0]), ctx)
        if sm is not None:
            yield self.report(node, ctx, fill=ctx.source(node)[:60], line=sm.lineno,
                              related=[Related(ctx.path, sm.lineno,
                                               "the softmax that reads the filled scores",
                                               ctx.column(sm))])


def softmax_reading(fill: ast.Call, filled: ast.AST, ctx: Context) -> ast.Call | None:
    """The softmax whose input is ``fill``'s result, directly, through the name it is
    bound to, or (in place) the tensor it fills, in the same function."""
    fn = ctx.function or ctx.tree
    stmt = ctx.statement
    name = None
    if fill.func.attr == "masked_fill_":  # type: ignore[union-attr]
        name = filled.id if isinstance(filled, ast.Name) else None
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Name) and strip(stmt.value) is fill:
        name = stmt.targets[0].id
    scope = ctx.scope(fn)
    here = scope.binding_before(name, fill.lineno + 1) if name else None
    for n in walk(fn):
        if not isinstance(n, ast.Call) or n.lineno < fill.lineno:
            continue
        op = _softmax_operand(n, ctx)
        if op is None:
            continue
        op = strip(op)
        if op is fill:
            return n
        if name is not None and isinstance(op, ast.Name) and op.id == name and \
                n.lineno > fill.lineno and scope.binding_before(name, n.lineno) is here:
            return n
    return None
