"""GT751: a `torch.where`/`masked_fill` guard placed outside the singular op it guards."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.flow import DETACHED, NUMBER
from gradtrace.lint.rules.numerics._ops import (
    DIV, ROOT, has_positive_shift, resolve, singular_uses, spelled, torch_op)

FLIP = {ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Eq: ast.Eq,
        ast.NotEq: ast.NotEq}
NEGATE = {ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
          ast.NotEq: ast.Eq}
METHOD_COMPARE = {"gt": ast.Gt, "ge": ast.GtE, "lt": ast.Lt, "le": ast.LtE, "eq": ast.Eq,
                  "ne": ast.NotEq, "greater": ast.Gt, "less": ast.Lt,
                  "greater_equal": ast.GtE, "less_equal": ast.LtE, "not_equal": ast.NotEq}
ZERO_NAN_BELOW = frozenset({"sqrt", "rsqrt", "pow", "float_power", "**"})
BOUNDED = frozenset({"acos", "arccos", "asin", "arcsin", "atanh", "arctanh"})
OVERFLOW = frozenset({"exp", "expm1", "exp2", "sinh", "cosh"})


def _const(e: ast.AST) -> float | None:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = _const(e.operand)
        return -v if v is not None else None
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
            and not isinstance(e.value, bool):
        return float(e.value)
    return None


def _holds(op: type, a: float, c: float) -> bool:
    return {ast.Gt: a > c, ast.GtE: a >= c, ast.Lt: a < c, ast.LtE: a <= c, ast.Eq: a == c,
            ast.NotEq: a != c}[op]


def _reaches_singular(op: str, region: type, c: float | None) -> bool:
    """Whether values ``x`` with ``x <region> c`` (c None: unknown) include ``op``'s singular
    points (where its derivative is infinite or NaN)."""
    if op in OVERFLOW:  # a guard against large values (not a branch at a negative point)
        return (c is None or c > 0) and region in (ast.Gt, ast.GtE)
    if c is None:
        return True
    if op in BOUNDED:
        return region is not ast.Eq or abs(c) >= 1
    if op in ("logit",):
        return _holds(region, 0.0, c) or _holds(region, 1.0, c)
    if op in ZERO_NAN_BELOW and region in (ast.Lt, ast.LtE, ast.NotEq):
        return True
    if op in ZERO_NAN_BELOW and region is ast.Eq and c < 0:
        return True
    return _holds(region, 0.0, c)


def _comparisons(test: ast.AST, ctx: Context, negated: bool = False
                 ) -> Iterator[tuple[ast.AST, type, ast.AST, bool]]:
    """(left, op, right, negated) for the comparisons a mask is made of (``&``, ``|``, ``~``,
    ``logical_and``, ``x.gt(0)``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, (ast.Invert, ast.Not)):
        yield from _comparisons(test.operand, ctx, not negated)
    elif isinstance(test, ast.BinOp) and isinstance(test.op, (ast.BitAnd, ast.BitOr)):
        yield from _comparisons(test.left, ctx, negated)
        yield from _comparisons(test.right, ctx, negated)
    elif isinstance(test, ast.BoolOp):
        for v in test.values:
            yield from _comparisons(v, ctx, negated)
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in FLIP:
        yield test.left, type(test.ops[0]), test.comparators[0], negated
    elif isinstance(test, ast.Call):
        got = torch_op(test, ctx)
        if got and got[0] in METHOD_COMPARE:
            rest = [a for a in test.args if a is not got[1]]
            if len(rest) == 1:
                yield got[1], METHOD_COMPARE[got[0]], rest[0], negated
        elif got and got[0] in ("logical_and", "logical_or") and len(test.args) == 2:
            yield from _comparisons(test.args[0], ctx, negated)
            yield from _comparisons(test.args[1], ctx, negated)


def _unguarded(op: str, operand: ast.AST, test: ast.AST, selected_when: bool,
               ctx: Context) -> bool:
    """Whether the elements where the branch holding ``op(operand)`` is *not* selected can
    hold ``op``'s singular points, judged from the comparisons of ``operand`` in ``test``."""
    want = spelled(operand)
    for left, cmp, right, negated in _comparisons(test, ctx):
        if spelled(left) == want:  # `x > c`: x is the tested value
            c = _const(resolve(right, ctx, right.lineno))  # type: ignore[attr-defined]
        elif spelled(right) == want and _const(left) is not None:  # `0 < x`
            cmp, c = FLIP[cmp], _const(left)
        else:
            continue
        # the op's branch is taken where (comparison is True) == selected_when ^ negated
        taken_when_true = selected_when != negated
        region = NEGATE[cmp] if taken_when_true else cmp
        if _reaches_singular(op, region, c):
            return True
    return False


class SingularOpOutsideWhereGuard(Rule):
    """`torch.where(x > 0, torch.sqrt(x), 0)`: the guard picks the value, autograd still
    differentiates the op where it is singular.

    Why: `torch.where` (and `masked_fill`) run both branches and pass a gradient of 0 to the
    one they did not select. Where that branch's op is singular (`sqrt`/`rsqrt`/`log`/a
    division at 0, `acos` at +-1, `exp` overflowing for large inputs), its derivative is
    infinite or NaN and `0 * inf` is NaN, so the gradient of the guarded elements is NaN
    (pytorch/pytorch#156212, checked on torch 2.13). Put the guard *inside* the op:
    `torch.sqrt(torch.where(x > 0, x, 1.0))`, `torch.log(x.clamp(min=eps))`,
    `torch.exp(x.clamp(max=th))`, then select.
    Known limits: the condition must test the very value the op consumes (directly, or a mask
    bound to that comparison in the same function); a condition on another tensor is not
    judged.
    """

    code = "GT751"
    name = "singular-op-outside-where-guard"
    message = ("`{guard}` discards `{op}` where `{operand}` fails its test, but autograd "
               "still differentiates it there ({why}) and 0 * inf makes those gradients NaN; "
               "guard the input (`{operand}` replaced by a safe value or clamped before "
               "`{op}`), then select")
    triggers = ("where", "masked_fill")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def soft_root(x):
                return torch.where(x > 0, torch.sqrt(x), x)
            """, at=(4, 11)),
        Bad("""
            import torch

            def capped_exp(x, limit):
                mask = x <= limit
                return torch.where(mask, x.exp(), torch.ones_like(x))
            """, at=(5, 11)),
        Bad("""
            import torch

            def safe_log(p):
                return torch.log(p).masked_fill(p == 0, 0.0)
            """, at=(4, 11)),
        Good("""
            import torch

            def soft_root(x):
                safe = torch.where(x > 0, x, torch.ones_like(x))
                return torch.where(x > 0, torch.sqrt(safe), x)
            """),
        Good("""
            import torch

            def log_then_linear(x):
                return torch.where(x >= 1, x - 1, torch.log(x))
            """),
        Good("""
            import torch

            def masked_log(p, valid):
                return torch.where(valid, torch.log(p), torch.zeros_like(p))
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        picked = _where_parts(node, ctx)
        if picked is None or ctx.grad_disabled is not None:
            return
        test, branches = picked
        test = resolve(test, ctx, node.lineno)
        for branch, selected_when in branches:
            expr = resolve(branch, ctx, node.lineno)
            for n, op, operand, why in singular_uses(expr, ctx):
                if op in ("/", "div", "true_divide", "divide") or not _tensor_operand(
                        operand, ctx, node.lineno):
                    continue  # a guarded division: mostly counts in metrics (UNDECIDABLE)
                if _unguarded(op, operand, test, selected_when, ctx):
                    shown = {"/": "/", "**": "**"}.get(op, op)
                    related = [] if n.lineno == node.lineno else [  # type: ignore[attr-defined]
                        Related(ctx.path, n.lineno, f"`{ctx.source(n)}` is computed here",
                                ctx.column(n))]
                    yield self.report(node, ctx, related=related, guard=_short(node, ctx),
                                      operand=ctx.source(operand), op=shown,
                                      why=_why(op, why), cond=ctx.source(test))
                    return


def _tensor_operand(e: ast.AST, ctx: Context, line: int) -> bool:
    """Not a constant, a new tensor, a number or a value already kept off the singular point
    (``x = x.clamp(min=1)`` before the guard)."""
    if _const(e) is not None:
        return False
    if ctx.scope().kind(e) in (NUMBER, DETACHED):
        return False
    inner = resolve(e, ctx, line)
    return inner is e or not has_positive_shift(inner, ctx)


def _why(op: str, why: str) -> str:
    if why in (DIV, ROOT):
        return why
    return f"`{op}` has {why}"


def _short(node: ast.Call, ctx: Context) -> str:
    f = node.func
    if (ctx.qualified_name(f) or "").startswith("torch.") or not isinstance(f, ast.Attribute):
        return f"{ctx.source(f)}(...)"
    return f".{f.attr}(...)"


def _where_parts(node: ast.Call, ctx: Context
                 ) -> tuple[ast.AST, list[tuple[ast.AST, bool]]] | None:
    """(condition, [(branch, selected when the condition is ...)]) of a where-like call."""
    q = ctx.qualified_name(node.func) or ""
    if q == "torch.where" and len(node.args) == 3:
        return node.args[0], [(node.args[1], True), (node.args[2], False)]
    got = torch_op(node, ctx) if not q.startswith("torch.") else None
    if got and got[0] == "where" and len(node.args) == 2:
        return node.args[0], [(got[1], True), (node.args[1], False)]
    if got and got[0] == "masked_fill" and len(node.args) == 2:
        return node.args[0], [(got[1], False)]
    return None
