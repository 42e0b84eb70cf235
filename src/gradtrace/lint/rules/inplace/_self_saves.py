"""# NOTE [ops that save the written tensor]: which op in the value of an in-place write
``x op= value`` saves ``x`` itself for backward, so that the write changes what backward reads
(GT605's own-expression form).

Beyond a method of :data:`INPUT_SAVING_OPS` on ``x`` (``x /= x.norm()``), a product of ``x``
with itself saves it: ``x * x``, ``torch.mul(x, x)``, ``x ** 2`` (``mul`` saves each operand
for the other's gradient, ``pow`` its base), and so does a helper of the file that runs one of
these on its parameters when the call binds ``x`` to them: kaolin's
``h /= torch.sqrt(_dot(h, h))`` with ``def _dot(a, b): return torch.sum(a * b, ...)``
(kaolin#832), ``h.div_(self._sq(h))`` with a method ``_sq(v)`` returning ``v.pow(2)``.
Checked on torch 2.13: each of these raises at backward when ``x`` requires grad; the same
write divided by ``_total(h)`` (a helper that only sums) trains, and so does the
out-of-place ``h = h / torch.sqrt(_dot(h, h))``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.module_results import basic_index
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# elementwise ops and reductions whose backward needs their input (checked one by one on torch
# 2.13: `y = f(x)`, then `x.div_(y)`, then backward raises); not exp/sqrt/tanh/sigmoid/
# softmax (they save their output), nor sum/mean (shapes only)
INPUT_SAVING_OPS = frozenset({
    "norm", "vector_norm", "normalize", "pow", "square", "log", "sin", "cos", "abs", "clamp",
    "softplus", "var", "std", "gelu", "silu", "mish", "elu", "leaky_relu", "logsigmoid", "erf",
    "atan", "amax"})
VIEWS = frozenset({"view", "view_as", "squeeze", "unsqueeze", "permute", "transpose", "t",
                   "unflatten", "narrow", "select", "expand"})
Fn = ast.FunctionDef | ast.AsyncFunctionDef


def saved_by(n: ast.AST, ctx: Context, written: ast.expr | str | None = None
             ) -> ast.expr | None:
    """The (unviewed) tensor ``n`` saves for backward as its input: :func:`input_saved`, else
    :func:`self_saved`; a helper of the file is read only for the value of a write into
    ``written`` that passes it ``written`` (a helper's body is read once, but the calls of
    every statement are many)."""
    if isinstance(n, ast.Call):
        got = input_saved(n, ctx)
        if got is None and (isinstance(n.func, ast.Attribute) and n.func.attr == "mul"
                            or written is not None and any(_is(a, written) for a in n.args)):
            got = self_saved(n, ctx, ctx.function or ctx.tree)
    elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.MatMult, ast.Pow)):
        got = self_saved(n, ctx, ctx.function or ctx.tree)
    else:
        return None
    return None if got is None else unview(got)


def _is(a: ast.expr, written: ast.expr | str) -> bool:
    """``a`` spells ``written`` (a name, or the same attribute / subscript expression)."""
    if isinstance(written, str):
        return isinstance(a, ast.Name) and a.id == written
    if isinstance(written, ast.Name):
        return isinstance(a, ast.Name) and a.id == written.id
    return type(a) is type(written) and ast.dump(a) == ast.dump(written)


def input_saved(n: ast.AST, ctx: Context) -> ast.expr | None:
    """The (unviewed) tensor an op of :data:`INPUT_SAVING_OPS` saves: the receiver of
    ``x.norm(...)``, the first argument of ``F.softplus(x)`` / ``torch.linalg.vector_norm(x)``."""
    if not isinstance(n, ast.Call):
        return None
    f = n.func
    name = f.attr if isinstance(f, ast.Attribute) else ""
    if name not in INPUT_SAVING_OPS:
        return None
    if (ctx.qualified_name(f) or "").startswith("torch."):
        return unview(n.args[0]) if n.args and not isinstance(n.args[0], ast.Starred) else None
    recv = f.value  # type: ignore[attr-defined]
    if isinstance(recv, ast.Name) and recv.id == "self":
        return None  # `self.norm(h)`: a layer named `norm`, not `Tensor.norm`
    return unview(recv)


def unview(e: ast.expr) -> ast.expr:
    """``x.transpose(1, 2)`` / ``x[:, 0]`` -> ``x``: a view shares ``x``'s version counter, so
    a later in-place write into ``x`` changes what the layer saved."""
    while True:
        if isinstance(e, ast.Subscript) and basic_index(e.slice):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in VIEWS and not e.keywords:
            e = e.func.value
        else:
            return e


def self_saved(n: ast.AST, ctx: Context, where: ast.AST) -> ast.expr | None:
    """The argument ``n`` saves by combining it with itself (``x * x``, ``torch.mul(x, x)``,
    ``x ** 2``) or through a helper of the file (NOTE [ops that save the written tensor])."""
    if isinstance(n, ast.BinOp):
        if isinstance(n.op, (ast.Mult, ast.MatMult)) and _same(n.left, n.right, ctx):
            return n.left
        if isinstance(n.op, ast.Pow) and not (isinstance(n.right, ast.Constant)
                                              and n.right.value in (0, 1)):
            return n.left
        return None
    if not isinstance(n, ast.Call) or any(isinstance(a, ast.Starred) for a in n.args):
        return None
    f = n.func
    if isinstance(f, ast.Attribute) and f.attr == "mul":
        pair = list(n.args[:2]) if (ctx.qualified_name(f) or "").startswith("torch.") \
            else [f.value, *n.args[:1]]
        return pair[0] if len(pair) == 2 and _same(pair[0], pair[1], ctx) else None
    if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name)
                                             and f.value.id == "self"):
        return None  # (a method of another object: not a helper of this file)
    fn = ctx.analysis.callee(n, where)
    if fn is None or n.keywords:
        return None
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args)]
    if isinstance(f, ast.Attribute) and params[:1] == ["self"]:
        params = params[1:]
    bound = dict(zip(params, n.args))
    for group in ctx.memo("gt605-helper-saves", fn, lambda: _saving_groups(fn, ctx)):
        args = [bound.get(p) for p in group]
        if all(x is not None for x in args) and all(_same(args[0], x, ctx) for x in args):
            return args[0]
    return None


def _same(a: ast.expr | None, b: ast.expr | None, ctx: Context) -> bool:
    return a is not None and b is not None and isinstance(a, (ast.Name, ast.Attribute,
                                                               ast.Subscript)) \
        and ctx.source(a) == ctx.source(b)


def _saving_groups(fn: Fn, ctx: Context) -> tuple[tuple[str, ...], ...]:
    """The sets of ``fn``'s parameters that, all bound to one tensor, make ``fn`` save it:
    ``(a, b)`` for ``a * b``, ``(v,)`` for ``v.pow(2)`` / ``v ** 2`` / ``v * v``; parameters
    the helper rebinds are left out."""
    a = fn.args
    params = {p.arg for p in (*a.posonlyargs, *a.args)} - {"self", "cls"}
    params -= {n.id for n in walk(fn) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)}
    out: list[tuple[str, ...]] = []
    for n in walk(fn):
        pair: tuple[ast.AST, ...] = ()
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.MatMult)):
            pair = (n.left, n.right)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) \
                and not (isinstance(n.right, ast.Constant) and n.right.value in (0, 1)):
            pair = (n.left,)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            q = ctx.qualified_name(n.func) or ""
            if n.func.attr == "mul" and q.startswith("torch."):
                pair = tuple(n.args[:2])
            elif n.func.attr in INPUT_SAVING_OPS and q.startswith("torch.") and n.args:
                pair = (n.args[0],)
            elif n.func.attr in INPUT_SAVING_OPS | {"mul"} and not q.startswith("torch."):
                pair = (n.func.value, *n.args[:1]) if n.func.attr == "mul" else (n.func.value,)
        names = tuple(x.id for x in pair if isinstance(x, ast.Name))
        if names and len(names) == len(pair) and set(names) <= params:
            out.append(tuple(sorted(set(names))))
    return tuple(dict.fromkeys(out))
