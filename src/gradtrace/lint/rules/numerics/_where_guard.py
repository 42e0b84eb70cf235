"""GT751's reading of a ``torch.where`` guard: the comparisons its test makes (flipped,
negated, spelled as methods), and whether the branch it selects can still reach the singular
point of the op it guards; with the op tables (which GT757 reads too)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.context import Context
from gradtrace.lint.rules.numerics._ops import has_positive_shift, resolve, spelled, torch_op
from gradtrace.lint.nodes import bfs_walk
from gradtrace.lint.rules.numerics._values import OFFSETS, singular_value, value_of

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
    if op in ("acosh", "arccosh"):  # singular at 1, NaN below
        return _holds(region, 1.0, c) or region in (ast.Lt, ast.LtE, ast.NotEq) or \
            region is ast.Eq and c < 1
    if op in ("logit",):
        return _holds(region, 0.0, c) or _holds(region, 1.0, c)
    if op == "log1p":  # singular at -1, NaN below
        return _holds(region, -1.0, c) or region in (ast.Lt, ast.LtE) and c <= -1
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
               ctx: Context, derived: bool = True) -> bool:
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
    return derived and _derived_unguarded(op, operand, test, selected_when, ctx)


def _derived_unguarded(op: str, operand: ast.AST, test: ast.AST, selected_when: bool,
                       ctx: Context) -> bool:
    """``torch.where(x < 1, torch.sqrt(1 - x ** 2), ...)``: the op consumes arithmetic of the
    tested name alone; where the branch is not selected, some value of the name (the bound
    itself and points beyond it) puts the operand on the op's singular points."""
    names = {n.id for n in bfs_walk(operand) if isinstance(n, ast.Name)}
    if len(names) != 1:
        return False
    name = next(iter(names))
    if has_positive_shift(operand, ctx) and not _signed(name, test, ctx):
        return False  # (`squared + 1.0`: kept off 0 as far as the code says)
    for left, cmp, right, negated in _comparisons(test, ctx):
        if isinstance(left, ast.Name) and left.id == name:
            c = _const(resolve(right, ctx, right.lineno))  # type: ignore[attr-defined]
        elif isinstance(right, ast.Name) and right.id == name and _const(left) is not None:
            cmp, c = FLIP[cmp], _const(left)
        else:
            continue
        if c is None:
            continue
        region = NEGATE[cmp] if selected_when != negated else cmp
        up = region in (ast.Gt, ast.GtE, ast.NotEq)
        down = region in (ast.Lt, ast.LtE, ast.NotEq)
        xs = [c] if region in (ast.Eq, ast.GtE, ast.LtE) else []
        xs += [c + d for d in OFFSETS[1:] if up] + [c - d for d in OFFSETS[1:] if down]
        for x in xs:
            v = value_of(operand, name, x)
            if v is not None and singular_value(op, v):
                return True
    return False


# NOTE [signed value under a shift]
# ``sqrt(x + 1.0)`` is kept off 0 only if ``x`` cannot go below -1. A shift alone does not say
# so; the name's binding does: when ``x`` is bound in the function to arithmetic or a call that
# can give a negative value (``trace = m00 + m11 + m22`` of unpacked pieces, a torch op such as
# a matmul) and not to one that cannot (a square, ``abs``, a norm, ``exp``, a softmax, a sum of
# those) nor to a helper's or a model's result (a distance helper), the guard's other side
# (``x <= 0``) reaches the shifted op's singular point, and GT751 judges it like an unshifted
# one. A parameter or an unknown binding keeps the shift as a guard.

NONNEG_OPS = frozenset({"abs", "exp", "sqrt", "norm", "vector_norm", "sigmoid", "softmax",
                        "relu", "softplus", "square", "cosh", "exp2", "expm1_", "rsqrt"})
REDUCE = frozenset({"sum", "mean", "amax", "max", "amin", "min", "cumsum", "prod", "clone",
                    "float", "double", "view", "reshape", "squeeze", "unsqueeze", "flatten"})


def _nonneg(e: ast.AST, ctx: Context, line: int, depth: int = 0) -> bool:
    """``e`` cannot be negative by its spelling (NOTE [signed value under a shift])."""
    if depth > 4:
        return True  # (too deep to say: keep the shift as a guard)
    c = _const(e)
    if c is not None:
        return c >= 0
    if isinstance(e, ast.Name):  # (a parameter, an unpacked piece: either sign)
        v = _bound_value(e, ctx, line)
        return v is not e and _nonneg(v, ctx, line, depth + 1)
    if isinstance(e, ast.BinOp):
        if isinstance(e.op, ast.Pow):
            k = _const(e.right)
            return k is not None and k == int(k) and int(k) % 2 == 0 or _nonneg(
                e.left, ctx, line, depth + 1)
        if isinstance(e.op, ast.Mult) and ast.dump(e.left) == ast.dump(e.right):
            return True
        if isinstance(e.op, (ast.Add, ast.Mult, ast.Div)):
            return _nonneg(e.left, ctx, line, depth + 1) and _nonneg(e.right, ctx, line,
                                                                      depth + 1)
        return False
    if isinstance(e, ast.Call):
        got = torch_op(e, ctx)
        if got is None:
            return True  # a helper's or a model's result: its sign is not read here
        op, arg = got
        if op in NONNEG_OPS:
            return True
        if op in ("clamp", "clip", "clamp_min"):
            lo = e.args[1] if len(e.args) > 1 and arg is e.args[0] else e.args[0] if \
                e.args and arg is not e.args[0] else next(
                    (k.value for k in e.keywords if k.arg in ("min", "min_val")), None)
            return lo is not None and (_const(lo) or 0) >= 0 and _const(lo) is not None
        if op in REDUCE:
            return _nonneg(arg, ctx, line, depth + 1)
        return False
    return isinstance(e, ast.Subscript) and _nonneg(e.value, ctx, line, depth + 1)


def _signed(name: str, test: ast.AST, ctx: Context) -> bool:
    """``name`` is bound, in the function, to a value that can be negative."""
    line = getattr(test, "lineno", 0)
    e = ast.Name(id=name, ctx=ast.Load())
    v = _bound_value(e, ctx, line)
    return v is not e and not _nonneg(v, ctx, line)


def _bound_value(e: ast.Name, ctx: Context, line: int) -> ast.AST:
    """:func:`resolve`, also through an annotated binding (``trace: Tensor = a + b``)."""
    b = ctx.scope().binding_before(e.id, line)
    if b is not None and isinstance(b.stmt, ast.AnnAssign) and b.stmt.value is not None \
            and isinstance(b.stmt.target, ast.Name):
        return b.stmt.value
    return resolve(e, ctx, line)
