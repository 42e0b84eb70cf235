"""Loop and step protocol facts: which branch a loop's first pass takes, which optimizers a
method steps through ``self``.

# NOTE [first pass]
``for epoch in range(n): if epoch > cfg.START: scheduler.step()`` steps the scheduler on the
first pass when ``cfg.START`` is a number below 0: the order of the first pass (what runs
before the first ``optimizer.step()``) depends on the guard's value there. The guard is known
when it compares the loop's counter (``range``'s start, 0 by default; ``enumerate``'s index)
with a number the file fixes: a literal, or a name or class attribute (``cfg.START``,
``args.warmup``) assigned a literal once in the whole file and never stored elsewhere.
Anything else (a value read from a config file, the command line, a parameter) is unknown.

# NOTE [stepped through self]
``self.train(epoch)`` steps ``self.optimizer`` when that method (or one it calls through
``self``) calls ``self.optimizer.step()`` (or ``self.scaler.step(self.optimizer)``): the
caller's and the callee's ``self`` are one object, so the attribute names match.
"""
from __future__ import annotations

import ast
import operator
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
OPS: dict[type, Callable[[float, float], bool]] = {
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _literal(e: ast.AST) -> float | None:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        v = _literal(e.operand)
        return None if v is None else (-v if isinstance(e.op, ast.USub) else v)
    if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) \
            and not isinstance(e.value, bool):
        return float(e.value)
    return None


def _stores(ctx: Context, attr: str) -> int:
    """How many times the file binds ``<anything>.attr`` or a plain name ``attr``."""
    key = ("protocol-stores", 0)
    table = ctx._memo.get(key)  # noqa: SLF001 - the per-file memo every fact shares
    if table is None:
        counts: dict[str, int] = {}
        for n in walk(ctx.tree):
            if isinstance(n, (ast.Attribute, ast.Name)) and isinstance(n.ctx, ast.Store):
                k = n.attr if isinstance(n, ast.Attribute) else n.id
                counts[k] = counts.get(k, 0) + 1  # `x += 1` stores too
        table = ctx._memo[key] = counts  # noqa: SLF001
    return table.get(attr, 0)  # type: ignore[union-attr]


def fixed_number(e: ast.AST, ctx: Context) -> float | None:
    """The number ``e`` always is (NOTE [first pass]): a literal, or a module-level name or a
    class attribute of the file (``cfg.START``) assigned a literal once and never stored
    again anywhere in the file."""
    v = _literal(e)
    if v is not None:
        return v
    body: list[ast.stmt] | None = None
    name: str | None = None
    if isinstance(e, ast.Name):
        body, name = ctx.tree.body, e.id
    elif isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        cls = next((s for s in ctx.tree.body if isinstance(s, ast.ClassDef)
                    and s.name == e.value.id), None)
        if cls is not None:
            body, name = cls.body, e.attr
    if body is None or name is None or _stores(ctx, name) != 1:
        return None
    for s in body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t = s.targets[0]
            if isinstance(t, ast.Name) and t.id == name:
                return _literal(s.value)
            if isinstance(t, ast.Tuple) and isinstance(s.value, ast.Tuple) \
                    and len(t.elts) == len(s.value.elts):
                for te, ve in zip(t.elts, s.value.elts):
                    if isinstance(te, ast.Name) and te.id == name:
                        return _literal(ve)
    return None


def _counter(loop: ast.For | ast.AsyncFor, ctx: Context) -> tuple[str, float] | None:
    """(the loop's counter name, its first value): ``for i in range(a, ...)``,
    ``for i, x in enumerate(xs[, start])``."""
    it = loop.iter
    if not isinstance(it, ast.Call) or not isinstance(it.func, ast.Name):
        return None
    if it.func.id == "range" and isinstance(loop.target, ast.Name) and it.args:
        first = fixed_number(it.args[0], ctx) if len(it.args) > 1 else 0.0
        return (loop.target.id, first) if first is not None else None
    if it.func.id == "enumerate" and isinstance(loop.target, ast.Tuple) and loop.target.elts \
            and isinstance(loop.target.elts[0], ast.Name):
        start = it.args[1] if len(it.args) > 1 else next(
            (k.value for k in it.keywords if k.arg == "start"), None)
        first = fixed_number(start, ctx) if start is not None else 0.0
        return (loop.target.elts[0].id, first) if first is not None else None
    return None


def first_pass_truth(test: ast.expr, loop: ast.stmt, ctx: Context) -> bool | None:
    """The value ``test`` has on the first pass of ``loop`` when the code fixes it
    (NOTE [first pass]); None: unknown."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(test, ast.Compare) \
            or len(test.ops) != 1 or type(test.ops[0]) not in OPS:
        return None
    got = _counter(loop, ctx)
    if got is None:
        return None
    name, first = got
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Name) and left.id == name:
        other = fixed_number(right, ctx)
        return None if other is None else OPS[type(test.ops[0])](first, other)
    if isinstance(right, ast.Name) and right.id == name:
        other = fixed_number(left, ctx)
        return None if other is None else OPS[type(test.ops[0])](other, first)
    return None


def stepped_through_self(fn: Fn, ctx: Context) -> frozenset[str]:
    """The ``self.<attr>`` optimizers the method ``fn`` steps, itself or through the methods
    it calls on ``self`` (NOTE [stepped through self])."""
    cls = ctx.analysis.class_of(fn)
    if cls is None:
        return frozenset()
    out: set[str] = set()
    todo, seen = [fn], set()
    while todo:
        m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        for n in walk(m):
            if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Attribute):
                continue
            recv = n.func.value
            if n.func.attr == "step":
                for r in (recv, *(n.args[:1])):
                    d = dotted(r) or ""
                    if d.startswith("self.") and d.count(".") == 1:
                        k = cls.attr_kind(d[5:])
                        if k is not None and k.what == OPTIMIZER:
                            out.add(d)
            if isinstance(recv, ast.Name) and recv.id == "self":
                callee = cls.methods.get(n.func.attr)
                if callee is not None:
                    todo.append(callee)
    return frozenset(out)
