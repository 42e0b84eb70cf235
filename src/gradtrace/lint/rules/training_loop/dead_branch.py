"""GT484: training work nested under a condition that contradicts an enclosing one."""
from __future__ import annotations

import ast
import math
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule

# (lower, lower inclusive, upper, upper inclusive) of `name OP constant`
Interval = tuple[float, bool, float, bool]
FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}
TRAINS = frozenset({"backward", "step"})


def _bound(test: ast.expr) -> tuple[str, Interval] | None:
    """(name, the interval of reals the test leaves it) for ``epoch < 10``, ``10 <= epoch``,
    ``epoch == 3``; None for anything else."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(left, ast.Constant) and isinstance(right, ast.Name) \
            and type(op) in FLIP:
        left, right, op = right, left, FLIP[type(op)]()
    if not (isinstance(left, ast.Name) and isinstance(right, ast.Constant)
            and isinstance(right.value, (int, float)) and not isinstance(right.value, bool)):
        return None
    c = float(right.value)
    inf = math.inf
    got = {ast.Lt: (-inf, False, c, False), ast.LtE: (-inf, False, c, True),
           ast.Gt: (c, False, inf, False), ast.GtE: (c, True, inf, False),
           ast.Eq: (c, True, c, True)}.get(type(op))
    return None if got is None else (left.id, got)


def _negated(iv: Interval) -> list[Interval]:
    lo, loi, hi, hii = iv
    out = []
    if lo > -math.inf:
        out.append((-math.inf, False, lo, not loi))
    if hi < math.inf:
        out.append((hi, not hii, math.inf, False))
    return out


def _disjoint(a: Interval, b: Interval) -> bool:
    lo, loi = max((a[0], a[1]), (b[0], b[1]), key=lambda x: (x[0], not x[1]))
    hi, hii = min((a[2], a[3]), (b[2], b[3]), key=lambda x: (x[0], x[1]))
    return lo > hi or lo == hi and not (loi and hii)


def _facts(test: ast.expr, holds: bool) -> list[tuple[str, list[Interval]]]:
    """What a branch knows: (name, the intervals it lies in) for each comparison the test
    asserts (a conjunct of an ``and`` when taken, the one comparison when not taken)."""
    parts = test.values if holds and isinstance(test, ast.BoolOp) \
        and isinstance(test.op, ast.And) else [test]
    out = []
    for p in parts:
        got = _bound(p)
        if got is not None:
            out.append((got[0], [got[1]] if holds else _negated(got[1])))
    return out


def _bounded_ifs(tree: ast.AST) -> dict[str, list[ast.If]]:
    """The file's ``if`` statements whose test compares a name with a number, by name."""
    out: dict[str, list[ast.If]] = {}
    for n in of_types(tree, (ast.If,)):  # walk's order, from the file's typed index
        got = _bound(n.test)
        if got is not None:
            out.setdefault(got[0], []).append(n)
    return out


def _inner_ifs(body: list[ast.stmt]) -> Iterator[ast.If]:
    """The ``if`` statements nested in ``body`` (not in a nested function or class)."""
    stack = list(reversed(body))
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.If):
            yield n
        stack.extend(reversed(list(ast.iter_child_nodes(n))))


class TrainingUnderContradictoryBranch(Rule):
    """Training work (a `backward()`, a `step()`, or a function of the file that runs one)
    sits under an `if` whose condition contradicts the `if` it is nested in:
    `if epoch >= 10: train_semi(...)` inside `if epoch < 10:`.

    Why: the inner condition can never hold where it is checked, so that training phase never
    runs, and nothing fails: the run trains without it (psellcam/LaplaceNet#1: an indentation
    slip put the semi-supervised phase under the supervised branch; `train_semi` was called 0
    times and the classifier did not move over the epochs meant for it, checked on torch
    2.13). Dedent the inner `if` to the level of the outer one. Only comparisons of one name
    with a number (`<`, `<=`, `>`, `>=`, `==`; a conjunct of an `and`) are compared, and only
    when nothing in the outer branch assigns that name.
    """

    code = "GT484"
    name = "training-under-contradictory-branch"
    message = ("`{inner}` can never hold inside `{outer}` (line {line}): the training this "
               "branch runs ({what}) never happens; dedent it to the outer `if`'s level")
    triggers = ("backward(", "step(")
    examples = [
        Bad("""
            def fit(model, opt, loader, train_sup, train_semi):
                for epoch in range(20):
                    if epoch < 10:
                        train_sup(model, opt, loader)
                        if epoch >= 10:
                            for x, y in loader:
                                opt.zero_grad()
                                model(x).sum().backward()
                                opt.step()
            """, at=(5, 12)),
        Good("""
            def fit(model, opt, loader, train_sup):
                for epoch in range(20):
                    if epoch < 10:
                        train_sup(model, opt, loader)
                    if epoch >= 10:
                        for x, y in loader:
                            opt.zero_grad()
                            model(x).sum().backward()
                            opt.step()
            """),
    ]

    def visit_If(self, node: ast.If, ctx: Context) -> Iterator[Finding]:
        bounded = ctx.memo("gt484-bounded", ctx.tree, lambda: _bounded_ifs(ctx.tree))
        for body, holds in ((node.body, True), (node.orelse, False)):
            known = _facts(node.test, holds) if body else []
            lines = range(body[0].lineno, (body[-1].end_lineno or 0) + 1) if body else range(0)
            near = [i for name, _ in known for i in bounded.get(name, ())
                    if i is not node and i.lineno in lines]
            if not near:  # (most ifs: no later `if` on the same name inside them)
                continue
            stored = {n.id for s in body for n in walk(s)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            for inner in _inner_ifs(body) if near else ():
                got = _bound(inner.test)
                if got is None or got[0] in stored:
                    continue
                if not any(name == got[0] and all(_disjoint(iv, got[1]) for iv in ivs)
                           for name, ivs in known):
                    continue
                what = self._trains(inner, ctx)
                if what is None:
                    continue
                yield self.report(inner, ctx, related=(Related(
                    ctx.path, node.lineno, "the enclosing condition", ctx.column(node)),),
                    inner=f"if {ctx.source(inner.test)}",
                    outer=("if " if holds else "else of if ") + ctx.source(node.test),
                    line=node.lineno, what=what)

    @staticmethod
    def _trains(inner: ast.If, ctx: Context) -> str | None:
        """The first call of the branch that trains: ``x.backward()`` / ``opt.step()``, or a
        function of the file whose own body calls one."""
        for s in inner.body:
            for n in walk(s):
                if not isinstance(n, ast.Call):
                    continue
                if isinstance(n.func, ast.Attribute) and n.func.attr in TRAINS:
                    return ctx.source(n)[:40]
                fn = ctx.analysis.callee(n, ctx.function or ctx.tree)
                if fn is not None and any(
                        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                        and c.func.attr in TRAINS for c in walk(fn)):
                    return ctx.source(n)[:40]
        return None
