"""Where a value handed to sqrt reaches exactly 0 (GT753's shapes): a distance between two
points that coincide, `1 - c**2` at a cosine of +-1, a difference clamped at exactly 0."""
from __future__ import annotations

import ast

from gradtrace.lint.context import Context
from gradtrace.lint.nodes import bfs_walk, walk
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.numerics._ops import has_positive_shift, resolve, spelled, strip, torch_op
from gradtrace.lint.rules.numerics._bounds import CLAMPS, bounds, num

DISTANCE = "a sum of squared differences, 0 when the two points coincide"
SINE = "`1 - c**2`, 0 when `c` reaches +-1"
MSE = "a mean squared error, 0 when the prediction equals its target"
VARIANCE = ("a weighted sum of squared deviations (a variance), 0 when every weighted sample "
            "equals the mean (a constant input, all weights 0)")
MSE_FUNCS = frozenset({"torch.nn.functional.mse_loss"})
MSE_CLASSES = frozenset({"torch.nn.MSELoss", "torch.nn.modules.loss.MSELoss"})
FLOOR = ("a value clamped at exactly 0 (line {line}): the clamp keeps negative values off "
         "the sqrt, but a value of exactly 0 (two terms that cancel: a prediction equal to "
         "its target) passes it with its gradient")


def _square_of(e: ast.AST, ctx: Context) -> ast.AST | None:
    """``t`` when ``e`` is ``t ** 2``, ``t.pow(2)``, ``torch.square(t)`` or ``t * t``."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow) and num(e.right) == 2.0:
        return e.left
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult) \
            and spelled(e.left) == spelled(e.right):
        return e.left
    if isinstance(e, ast.Call):
        got = torch_op(e, ctx)
        if got and got[0] == "square":
            return got[1]
        if got and got[0] == "pow" and num(e.args[-1] if e.args else None) == 2.0:
            return got[1]
    return None


def zero_at_coincidence(e: ast.AST, ctx: Context) -> str | None:
    """What makes ``e`` reach exactly 0: a sum of squared differences (two equal points) or
    ``1 - c**2`` (a cosine of +-1). None for anything else."""
    e = strip(e)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) and isinstance(
            strip(e.left), ast.Call):  # `sum(w * (x - m) ** 2) / n`: 0 stays 0
        got = torch_op(strip(e.left), ctx)  # type: ignore[arg-type]
        if got and got[0] in ("sum", "nansum") and _deviations(got[1], ctx):
            return VARIANCE
    if isinstance(e, ast.Call):
        got = torch_op(e, ctx)
        if got and got[0] in ("sum", "nansum", "mean"):
            sq = _square_of(strip(got[1]), ctx)
            if sq is not None and isinstance(strip(sq), ast.BinOp) \
                    and isinstance(strip(sq).op, ast.Sub):  # type: ignore[attr-defined]
                return DISTANCE if got[0] != "mean" else MSE
            bound = strip(resolve(strip(got[1]), ctx, e.lineno))
            if _elementwise_mse(bound, ctx):
                return MSE  # NOTE [reduced elementwise error]
            sq = _square_of(bound, ctx) if bound is not strip(got[1]) else None
            if sq is not None and isinstance(strip(sq), ast.BinOp) \
                    and isinstance(strip(sq).op, ast.Sub):  # type: ignore[attr-defined]
                return DISTANCE if got[0] != "mean" else MSE  # `d2 = (a - b) ** 2`
            if _deviations(got[1], ctx):
                return VARIANCE
        if _mean_squared_error(e, ctx):
            return MSE
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) and _squared_differences(e, ctx):
        return DISTANCE  # `dx ** 2 + dy ** 2`, `(y2 - y1).square() + (x2 - x1).square()`
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and num(e.left) == 1.0:
        c = _square_of(e.right, ctx)
        if c is not None and _tensor_like(c, ctx) and not _kept_inside_unit(c, ctx):
            return SINE
    if isinstance(e, ast.Call) and _floored_at_zero(e, ctx) and _can_cancel(
            torch_op(e, ctx)[1], ctx, e.lineno):  # type: ignore[index]
        return FLOOR.format(line=e.lineno)
    return None


def _deviations(e: ast.AST, ctx: Context) -> bool:
    """# NOTE [weighted squared deviations]
    ``w * (x - m) ** 2`` (either order) or ``dx2 * w`` with ``dx2`` bound in the function to
    such a square: the terms of a weighted variance (a statistics pooling's ``std``), all 0
    when every sample equals the mean (a constant feature, a speaker whose weights are all 0).
    Only a product with a squared difference counts; a plain square is a magnitude."""
    e = strip(e)
    if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult)):
        return False
    for side, other in ((e.left, e.right), (e.right, e.left)):
        side = strip(side)
        bound = strip(resolve(side, ctx, side.lineno)) if isinstance(  # type: ignore
            side, ast.Name) else side
        sq = _square_of(bound, ctx)  # type: ignore[arg-type]
        if sq is not None and isinstance(strip(sq), ast.BinOp) \
                and isinstance(strip(sq).op, ast.Sub):  # type: ignore[attr-defined]
            return _may_be_zero(strip(other), ctx)
    return False


def _may_be_zero(w: ast.AST, ctx: Context) -> bool:
    """Weights that may be all 0: a name (or attribute, index) of the function none of whose
    bindings is kept off 0 (``weights = weights + 1e-16`` is: pyannote's fix)."""
    name = dotted(w.value if isinstance(w, ast.Subscript) else w)
    if name is None:
        return False
    bs = ctx.scope().bindings.get(name, ())
    return not any(b.value is not None and has_positive_shift(b.value, ctx) for b in bs)


def _inside_unit(b: ast.AST | None) -> bool:
    """A clamp bound strictly inside (-1, 1): ``0.999``, ``1 - 1e-7``, ``-1 + eps``."""
    v = num(b)
    if v is not None:
        return abs(v) < 1.0
    if isinstance(b, ast.BinOp) and isinstance(b.op, (ast.Sub, ast.Add)):
        lo, hi = num(b.left), num(b.right)
        if lo is not None and hi is not None:
            return abs(lo - hi if isinstance(b.op, ast.Sub) else lo + hi) < 1.0
        return (lo == 1.0 and isinstance(b.op, ast.Sub)) or \
            (lo == -1.0 and isinstance(b.op, ast.Add))  # `1 - eps`, `-1 + eps`
    return False


def _kept_inside_unit(c: ast.AST, ctx: Context) -> bool:
    """``c`` is clamped to a range strictly inside (-1, 1), so ``1 - c**2`` never reaches 0
    (``torch.clamp(cos, -1 + 1e-7, 1 - 1e-7)``, here or where ``c`` was bound)."""
    for v in (strip(c), strip(resolve(strip(c), ctx, c.lineno))):  # type: ignore[attr-defined]
        b = bounds(v, ctx) if isinstance(v, ast.Call) else None
        if b is not None and b[0] in CLAMPS and _inside_unit(b[1]) and _inside_unit(b[2]):
            return True
    return False


def _can_cancel(e: ast.AST, ctx: Context, line: int, depth: int = 0) -> bool:
    """``e`` holds a difference (``a - b``, ``-x``, ``(-2) * x``), also in the names it reads
    (bound in the same function, a few steps back), so it can cancel to exactly 0; a product
    or a sum of non-negative terms (``det(A) * det(B)``, ``tr + 2 * s``) reaches 0 only when a
    factor or every term does."""
    for n in walk(e):
        if isinstance(n, ast.BinOp) and (isinstance(n.op, ast.Sub) or isinstance(
                n.op, ast.Mult) and any((num(o) or 0) < 0 for o in (n.left, n.right))) or \
                isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) \
                and num(n) is None:
            return True
        if depth < 3 and isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            v = resolve(n, ctx, line)
            if v is not n and _can_cancel(v, ctx, getattr(v, "lineno", line), depth + 1):
                return True
    return False


def _floored_at_zero(e: ast.Call, ctx: Context) -> bool:
    """``x.clamp(0)``, ``torch.clamp(x, min=0)``, ``x.clamp_min(0.)``: a lower bound of
    exactly 0 (not ``clamp(min=eps)``). The clamp's backward passes the gradient of a value on
    its bound (checked on torch 2.13), so an exact 0 gets sqrt's infinite derivative (``relu``
    passes 0 there: not reported)."""
    b = bounds(e, ctx)
    return b is not None and b[0] in ("clamp", "clip", "clamp_min") and num(b[1]) == 0.0


def _squared_differences(e: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """``e`` is a sum whose every term is the square of a difference (no epsilon term), or
    an even power of one: the square of a square, or of a name bound to a square or a
    difference (``drg = (mr - mg) ** 2; drg ** 2 + ...``, ``dx = a - b; dx ** 2 + ...``), 0 at
    the same point."""
    e = strip(e)
    if depth > 4:
        return False
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return _squared_differences(e.left, ctx, depth) and \
            _squared_differences(e.right, ctx, depth)
    sq = _square_of(e, ctx)
    if sq is None:
        return False
    inner = strip(sq)
    if isinstance(inner, (ast.Name, ast.Attribute)):
        bound = strip(resolve(inner, ctx, e.lineno))  # type: ignore[attr-defined]
        if bound is inner:
            return False
        inner = bound
    if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
        return True
    return _squared_differences(inner, ctx, depth + 1)


def _tensor_like(e: ast.AST, ctx: Context) -> bool:
    """Computed by a call or an index (a cosine from a layer), or handed in: not arithmetic
    on numbers and attributes (``beta = self.i ** -self.p``)."""
    value = resolve(e, ctx, e.lineno)  # type: ignore[attr-defined]
    if value is e:
        return True
    return any(isinstance(n, (ast.Call, ast.Subscript)) for n in bfs_walk(value))


def _mean_squared_error(e: ast.Call, ctx: Context) -> bool:
    """``F.mse_loss(a, b)`` (mean or sum reduction), or a call of an ``nn.MSELoss()`` bound to
    a name of the function or to ``self.<attr>`` in ``__init__``: 0 when ``a`` equals ``b``
    (an RMSE written ``sqrt(mse)``)."""
    if any(k.arg in ("reduction", "reduce") for k in e.keywords):
        none = any(isinstance(k.value, ast.Constant) and k.value.value in ("none", False)
                   for k in e.keywords)
        if none:
            return False
    q = ctx.qualified_name(e.func) or ""
    if q in MSE_FUNCS:
        return True
    f = e.func
    made = resolve(f, ctx, e.lineno)
    if made is f and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
            and f.value.id == "self":
        cls = ctx.analysis.class_of(ctx.function)
        info = cls.attrs.get(f.attr) if cls is not None else None
        if info is not None and not info.later:
            made = info.value
    if not isinstance(made, ast.Call) or made is e:
        return False
    if (ctx.qualified_name(made.func) or "") not in MSE_CLASSES:
        return False
    return not any(isinstance(k.value, ast.Constant) and k.value.value in ("none", False)
                   and k.arg in ("reduction", "reduce") for k in made.keywords)


# NOTE [reduced elementwise error]: ``err = F.mse_loss(est, ref, reduction="none")`` then
# ``err.mean(dims).sqrt()`` (a per-item RMSE): each reduced entry is 0 when that item's
# estimate equals its reference (a silent chunk, a masked-out sample, a perfect fit), and
# sqrt's derivative there is infinite: the gradient is NaN (torch 2.13). The elementwise error
# must be the reduced operand itself or the value of the name it reads (bound once before);
# an ``nn.MSELoss(reduction="none")`` bound to a name of the function counts, and so does a
# name bound to the square of a difference (``d2 = (a - b) ** 2; d2.sum(-1).sqrt()``).
def _elementwise_mse(e: ast.AST, ctx: Context) -> bool:
    if not isinstance(e, ast.Call):
        return False
    if (ctx.qualified_name(e.func) or "") not in MSE_FUNCS:  # `crit = nn.MSELoss(
        made = resolve(e.func, ctx, e.lineno)  # reduction="none")` bound in the function
        if made is e.func or not isinstance(made, ast.Call) \
                or (ctx.qualified_name(made.func) or "") not in MSE_CLASSES:
            return False
        e = made
    return any(k.arg == "reduction" and isinstance(k.value, ast.Constant)
               and k.value.value == "none" for k in e.keywords)
