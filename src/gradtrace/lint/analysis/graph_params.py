"""# NOTE [graph through helper returns]: the parameters of a function whose graph a value
surely carries, followed through the file's helpers.

``h = ndf_direction + view`` where ``ndf_direction`` is unpacked from
``sg_warp_distribution(amp, direction, ...)``, whose return is ``_reflect(-view, direction)``,
itself ``direction - 2 * _dot(direction, normal) * normal``: ``h`` carries the graph of the
enclosing function's ``direction`` and ``view`` (kaolin#832). A value carries a parameter's
graph when it is built from it by arithmetic (``+ - * / ** @``, unary minus), subscripts, a
tensor method of :data:`KEEPS`, a ``torch.*`` function (not one whose result has no gradient:
``argmax``, ``sign``, ``*_like``...), a local rebinding made with grad enabled, or the result
of a helper of the file (a function, or ``self.method``) whose every ``return`` carries the
helper parameter the call binds to it (the element of a returned tuple, when the call is
unpacked). The callers then tell whether that parameter requires grad
(:func:`gradtrace.lint.analysis.grad_values.passed_requiring`). Stricter than
:mod:`.origins`: anything else (``.detach()``, a loop target, a container, a helper with a
grad-off block) carries nothing.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_values import KEEP_ATTRS, KEEPS
from gradtrace.lint.context import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_DEPTH = 12
MAX_HELPERS = 3
ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.MatMult)
NO_GRAD_RESULTS = frozenset({
    "argmax", "argmin", "argsort", "sign", "floor", "ceil", "round", "trunc", "eq", "ne", "gt",
    "lt", "ge", "le", "isnan", "isinf", "isfinite", "nonzero", "bucketize", "searchsorted",
    "randint", "multinomial", "bernoulli", "heaviside", "logical_and", "logical_or",
    "logical_not"})
NONE: frozenset[str] = frozenset()


def graph_params(ctx: Context, fn: ast.AST, e: ast.AST, line: int) -> frozenset[str]:
    """The parameters of ``fn`` whose graph ``e``, read at ``line``, surely carries
    (NOTE [graph through helper returns])."""
    if not isinstance(fn, FUNCTION_TYPES):
        return NONE
    return _params(ctx, fn, e, line, 0, 0)


def _params(ctx: Context, fn: ast.AST, e: ast.AST, line: int, depth: int,
            hops: int) -> frozenset[str]:
    if depth > MAX_DEPTH:
        return NONE
    d = depth + 1
    if isinstance(e, ast.Subscript) or isinstance(e, ast.Attribute) and e.attr in KEEP_ATTRS:
        return _params(ctx, fn, e.value, line, d, hops)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _params(ctx, fn, e.operand, line, d, hops)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ARITH):
        return _params(ctx, fn, e.left, line, d, hops) | _params(ctx, fn, e.right, line, d, hops)
    if isinstance(e, ast.Name):
        return _name(ctx, fn, e.id, line, d, hops)
    if isinstance(e, ast.Call):
        return _call(ctx, fn, e, line, d, hops)
    return NONE


def _name(ctx: Context, fn: ast.AST, name: str, line: int, depth: int,
          hops: int) -> frozenset[str]:
    scope = ctx.scope(fn)
    b = scope.binding_before(name, line)
    if b is None:
        a = fn.args  # type: ignore[attr-defined]
        return frozenset({name}) if any(x.arg == name for x in (*a.posonlyargs, *a.args)) \
            else NONE
    stmt = b.stmt
    if b.no_grad or not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 \
            or scope.grad_off_at(stmt) is not None:
        return NONE
    target = stmt.targets[0]
    if isinstance(target, ast.Name) and b.value is not None:
        return _params(ctx, fn, b.value, b.line, depth, hops)
    if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Call) \
            and all(isinstance(t, ast.Name) for t in target.elts):
        i = [t.id for t in target.elts].index(name) if name in [
            t.id for t in target.elts] else None  # type: ignore[attr-defined]
        if i is not None:
            return _helper(ctx, fn, stmt.value, stmt.lineno, depth, hops, (i, len(target.elts)))
    return NONE


def _call(ctx: Context, fn: ast.AST, e: ast.Call, line: int, depth: int,
          hops: int) -> frozenset[str]:
    f = e.func
    q = ctx.qualified_name(f) or ""
    if q.startswith("torch."):
        last = q.rpartition(".")[2]
        if not last[:1].islower() or last in NO_GRAD_RESULTS or last.endswith("_like") \
                or q.startswith("torch.nn.init"):
            return NONE
        return frozenset().union(*(_params(ctx, fn, a, line, depth, hops) for a in e.args
                                   if not isinstance(a, ast.Starred)))
    if isinstance(f, ast.Attribute) and f.attr in KEEPS:
        got = _params(ctx, fn, f.value, line, depth, hops)
        if f.attr in ("add", "sub", "mul", "div", "matmul", "mm", "bmm"):
            got = got.union(*(_params(ctx, fn, a, line, depth, hops) for a in e.args[:1]))
        return got
    return _helper(ctx, fn, e, line, depth, hops, None)


def _helper(ctx: Context, fn: ast.AST, call: ast.Call, line: int, depth: int, hops: int,
            element: tuple[int, int] | None) -> frozenset[str]:
    """The caller's parameters a helper call's result (or its ``element``) carries."""
    if hops >= MAX_HELPERS or any(isinstance(a, ast.Starred) for a in call.args):
        return NONE
    helper = ctx.analysis.callee(call, fn)
    if helper is None or helper is fn:
        return NONE
    carried = ctx.memo(f"graph-params-returns:{element}:{hops}", helper,
                       lambda: _returned(ctx, helper, element, depth, hops))
    args = ctx.analysis.arguments(helper, call)
    return frozenset().union(*(_params(ctx, fn, args[p], line, depth, hops + 1)
                               for p in carried if p in args))


def _returned(ctx: Context, helper: ast.AST, element: tuple[int, int] | None, depth: int,
              hops: int) -> frozenset[str]:
    """The parameters of ``helper`` that every one of its returns carries."""
    scope = ctx.scope(helper)
    rets = _own_returns(helper)
    out: frozenset[str] | None = None
    for r in rets:
        v = r.value
        if element is not None:
            if not (isinstance(v, ast.Tuple) and len(v.elts) == element[1]):
                return NONE
            v = v.elts[element[0]]
        if v is None or scope.grad_off_at(r) is not None:
            return NONE
        got = _params(ctx, helper, v, r.lineno, depth, hops + 1)
        out = got if out is None else out & got
        if not out:
            return NONE
    return out or NONE


def _own_returns(fn: ast.AST) -> list[ast.Return]:
    """The ``return`` statements of ``fn`` itself (not of a nested function or class)."""
    out: list[ast.Return] = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Return):
            out.append(n)
        stack.extend(ast.iter_child_nodes(n))
    return out
