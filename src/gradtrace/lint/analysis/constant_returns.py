"""Values that are, on one path, a fresh constant tensor: a loss that may carry no graph.

# NOTE [constant on one path]
A value *may be a constant* where it is read when one path makes it a new tensor with no
history and no request for a gradient: a constant factory (``torch.zeros(1)``,
``torch.tensor(0.)``, ``x.new_zeros(())``, ``torch.zeros_like(t)``, without
``requires_grad=True``; ``torch.tensor``/``new_tensor`` only of literal numbers: a copy of
values that may carry a graph is GT104's), moved or reshaped by a method that keeps its kind (``.to(dev)``,
``.view(1)``, ``.sum()``), chosen by one arm of a conditional expression (``torch.zeros(1) if
correct else margin``), bound to a name (its last binding before the read: a straight-line
reading, so ``loss = torch.zeros(()); for t in terms: loss = loss + t`` is not one), divided or
multiplied by a number (``sum(ls) / len(ls)``), summed over a list comprehension of such values
(``sum([f(x) for x in xs])``, ``torch.stack([...]).mean()``: every element may be the constant),
or returned so by a function of the file (a helper, a method through an instance, a module's
``forward``: :func:`~gradtrace.lint.analysis.reach.called_function`), the whole value or the
element of a returned tuple that the caller takes (``f(x)[1]``, ``tree, loss = f(x)``), two
calls deep. Each (function, element) summary is computed once per file.
A sum with any other term (``cls_loss + box_loss``) has that term's graph and is not one.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef
MAX_DEPTH = 10
MAX_HOPS = 2
# constant factories: values chosen by the code, never by data that could carry a graph
CONSTANT_FUNCS = frozenset({"torch." + f for f in (
    "zeros", "ones", "full", "tensor", "Tensor", "FloatTensor", "zeros_like", "ones_like",
    "full_like", "scalar_tensor")})
# constructors that copy their data argument: constants only when that data is a literal
COPIES = frozenset({"torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.scalar_tensor"})
CONSTANT_METHODS = frozenset({"new_zeros", "new_ones", "new_full", "new_tensor"})
# tensor methods whose result is as constant as the receiver
KEEPS_CONSTANT = frozenset({
    "to", "cpu", "cuda", "float", "double", "half", "bfloat16", "view", "reshape", "squeeze",
    "unsqueeze", "sum", "mean", "type_as", "contiguous", "clone", "expand", "expand_as"})
REDUCERS = frozenset({"sum", "mean"})
STACKS = frozenset({"torch.stack", "torch.cat"})


def may_be_constant(ctx: Context, scope: Scope, e: ast.expr, line: int) -> ast.Call | None:
    """The constant factory call that ``e`` (read at ``line`` in ``scope``) is on one path, or
    None (NOTE [constant on one path])."""
    return _constant(ctx, scope, e, line, 0, 0)


def _asks_grad(call: ast.Call) -> bool:
    return any(k.arg == "requires_grad" or k.arg is None for k in call.keywords)


def _constant(ctx: Context, scope: Scope, e: ast.expr, line: int, depth: int, hops: int
              ) -> ast.Call | None:
    if depth > MAX_DEPTH:
        return None
    if isinstance(e, ast.IfExp):
        return _constant(ctx, scope, e.body, line, depth + 1, hops) or \
            _constant(ctx, scope, e.orelse, line, depth + 1, hops)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Div, ast.Mult)):
        if _number(e.right):
            return _constant(ctx, scope, e.left, line, depth + 1, hops)
        if isinstance(e.op, ast.Mult) and _number(e.left):
            return _constant(ctx, scope, e.right, line, depth + 1, hops)
        return None
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is None or not isinstance(b.stmt, ast.Assign) or len(b.stmt.targets) != 1:
            return None
        target, value = b.stmt.targets[0], b.stmt.value
        if _written(scope, e.id):
            return None
        if isinstance(target, ast.Name):
            return _constant(ctx, scope, value, b.line, depth + 1, hops)
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Call) \
                and not any(isinstance(t, ast.Starred) for t in target.elts):
            spots = [i for i, t in enumerate(target.elts) if dotted(t) == e.id]
            if len(spots) == 1:
                return _returned(ctx, scope, value, b.line, spots[0], len(target.elts), hops)
        return None
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Call) \
            and isinstance(e.slice, ast.Constant) and type(e.slice.value) is int:
        return _returned(ctx, scope, e.value, line, e.slice.value, None, hops)
    if not isinstance(e, ast.Call):
        return None
    f = e.func
    qual = ctx.qualified_name(f) or ""
    if qual in CONSTANT_FUNCS or (isinstance(f, ast.Attribute) and f.attr in CONSTANT_METHODS):
        if (qual in COPIES or getattr(f, "attr", None) == "new_tensor") and not (
                e.args and _literal(e.args[0])):
            return None  # a copy of values that may hold a graph: GT104's
        return None if _asks_grad(e) else e
    if isinstance(f, ast.Name) and f.id == "sum" and e.args:
        return _element(ctx, scope, e.args[0], line, depth, hops)
    if isinstance(f, ast.Attribute) and f.attr in REDUCERS and isinstance(f.value, ast.Call) \
            and (ctx.qualified_name(f.value.func) or "") in STACKS and f.value.args:
        return _element(ctx, scope, f.value.args[0], line, depth, hops)
    if isinstance(f, ast.Attribute) and f.attr in KEEPS_CONSTANT and not qual.startswith("torch."):
        return _constant(ctx, scope, f.value, line, depth + 1, hops)
    return _returned(ctx, scope, e, line, None, None, hops)


def _written(scope: Scope, name: str) -> bool:
    """Whether ``scope`` writes into ``name`` in place (``t[i] = v``, ``t += v``, ``t.add_(v)``,
    ``out=t``): a value written so may take a graph from what is written."""
    memo: dict[str, bool] = scope.ctx.memo("constant-written", scope.node, dict)
    if name not in memo:
        memo[name] = any(_writes(n, name) for n in walk(scope.node))
    return memo[name]


def _writes(n: ast.AST, name: str) -> bool:
    if isinstance(n, ast.AugAssign):
        return _root(n.target) == name
    if isinstance(n, (ast.Assign, ast.AnnAssign)):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        return any(isinstance(t, (ast.Subscript, ast.Attribute)) and _root(t) == name
                   for t in targets)
    if isinstance(n, ast.Call):
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr.endswith("_") and _root(f.value) == name:
            return True
        return any(k.arg == "out" and _root(k.value) == name for k in n.keywords)
    return False


def _root(e: ast.expr) -> str | None:
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


def _literal(e: ast.expr) -> bool:
    """A number, or a list/tuple of them, written in the code."""
    if isinstance(e, ast.UnaryOp):
        return _literal(e.operand)
    if isinstance(e, (ast.List, ast.Tuple)):
        return all(_literal(x) for x in e.elts)
    return isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
        and not isinstance(e.value, bool)


def _number(e: ast.expr) -> bool:
    """A Python number: a numeric constant or ``len(...)``."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "len"


def _element(ctx: Context, scope: Scope, seq: ast.expr, line: int, depth: int, hops: int
             ) -> ast.Call | None:
    """The constant every element of ``seq`` may be: a list comprehension (or a name bound to
    one) whose element may be the constant."""
    if isinstance(seq, ast.Name):
        b = scope.binding_before(seq.id, line)
        if b is None or not isinstance(b.stmt, ast.Assign) or len(b.stmt.targets) != 1 \
                or not isinstance(b.stmt.targets[0], ast.Name):
            return None
        seq, line = b.stmt.value, b.line
        fills = [n for n in walk(scope.node) if isinstance(n, ast.Call) and isinstance(
            n.func, ast.Attribute) and dotted(n.func.value) == b.name]
        if isinstance(seq, ast.List) and not seq.elts:
            return _appended(ctx, scope, b.name, fills, depth, hops)
        if fills:
            return None  # filled later with other values
    if not isinstance(seq, (ast.ListComp, ast.GeneratorExp)):
        return None
    return _constant(ctx, scope, seq.elt, line, depth + 1, hops)


def _appended(ctx: Context, scope: Scope, name: str, fills: list[ast.Call], depth: int,
              hops: int) -> ast.Call | None:
    """The constant every element of a list made empty (``parts = []``) may be: each call on
    it is an ``append`` of a value that may be the constant, and nothing else writes into it."""
    got = None
    if not fills or _written(scope, name):
        return None
    for c in fills:
        if c.func.attr != "append" or len(c.args) != 1:  # type: ignore[attr-defined]
            return None
        got = got or _constant(ctx, scope, c.args[0], c.lineno, depth + 1, hops)
        if _constant(ctx, scope, c.args[0], c.lineno, depth + 1, hops) is None:
            return None
    return got


def _returned(ctx: Context, scope: Scope, call: ast.Call, line: int, j: int | None,
              width: int | None, hops: int) -> ast.Call | None:
    """The constant that a function of the file returns on one path: its whole value
    (``j`` None) or element ``j`` of the tuple it returns (of ``width`` values when given)."""
    if hops >= MAX_HOPS:
        return None
    fn = called_function(call, scope, line)
    if fn is None or fn is scope.node:
        return None
    memo: dict[tuple[int, int | None, int | None], ast.Call | None] = ctx.memo(
        "constant-returns", ctx.tree, dict)
    key = (id(fn), j, width)
    if key not in memo:
        memo[key] = None  # recursion guard
        memo[key] = _summary(ctx, fn, j, width, hops + 1)
    return memo[key]


def _summary(ctx: Context, fn: Fn, j: int | None, width: int | None, hops: int
             ) -> ast.Call | None:
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in walk(fn)):
        return None
    inner = ctx.scope(fn)
    for r in returns(fn.body):
        v = r.value
        if v is None:
            continue
        if j is not None:
            if not isinstance(v, ast.Tuple) or j >= len(v.elts) or \
                    (width is not None and len(v.elts) != width) or \
                    any(isinstance(x, ast.Starred) for x in v.elts):
                continue
            v = v.elts[j]
        got = _constant(ctx, inner, v, r.lineno, 0, hops)
        if got is not None:
            return got
    return None
