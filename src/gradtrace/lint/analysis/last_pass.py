"""Blocks a loop's last pass skips: ``if i != n - 1:`` in ``for i in range(n):``.

# NOTE [last pass]
An MLP's loop ``for i in range(self.L): x = self.linear[i](x)`` / ``if i != self.L - 1: x =
F.relu(x)`` activates every layer's output but the last: on the last pass the test is false.
So when the loop's body rebinds the name unconditionally before that ``if``, the value the
name holds after the loop is never the guarded statement's (BasicTS's STWave ``x +=
inputs`` after the loop writes the last Linear's output, not a ReLU's). The tests read:
``i != n - 1``, ``i < n - 1``, ``i + 1 < n``, ``i + 1 != n`` (``n`` spelled as the
``range`` bound, or ``len(seq)`` for ``enumerate(seq)`` / ``range(len(seq))``).
"""
from __future__ import annotations

import ast

from gradtrace.lint.nodes import bfs_walk


def skipped_on_last_pass(fn: ast.AST, made: ast.stmt, name: str) -> bool:
    """``made`` sits under an ``if`` (directly in the body of a ``for`` loop of ``fn``)
    whose test is false on the loop's last pass, and that body rebinds ``name`` on every pass
    before the ``if`` (NOTE [last pass]): after the loop, ``name`` never holds ``made``'s
    value."""
    for loop in bfs_walk(fn):
        if not isinstance(loop, ast.For) or not isinstance(loop.target, (ast.Name, ast.Tuple)):
            continue
        index, bound = _index_and_bound(loop)
        if index is None:
            continue
        for k, s in enumerate(loop.body):
            if isinstance(s, ast.If) and not s.orelse and _encloses(s.body, made) \
                    and _false_last(s.test, index, bound) \
                    and any(_binds(p, name) for p in loop.body[:k]):
                return True
    return False


def after_loop_of(fn: ast.AST, made: ast.stmt, write: ast.stmt) -> bool:
    """``write`` is outside every ``for`` loop of ``fn`` that holds ``made``."""
    return not any(isinstance(lp, ast.For) and _encloses(lp.body, made)
                   and _encloses(lp.body, write) for lp in bfs_walk(fn))


def _index_and_bound(loop: ast.For) -> tuple[str | None, ast.expr | None]:
    it, t = loop.iter, loop.target
    if not isinstance(it, ast.Call) or not isinstance(it.func, ast.Name) or not it.args:
        return None, None
    if it.func.id == "range" and isinstance(t, ast.Name):
        bound = it.args[-1] if len(it.args) <= 2 else None
        if len(it.args) == 2 and not (isinstance(it.args[0], ast.Constant)
                                      and it.args[0].value == 0):
            return None, None
        return t.id, bound
    if it.func.id == "enumerate" and len(it.args) == 1 and isinstance(t, ast.Tuple) \
            and t.elts and isinstance(t.elts[0], ast.Name):
        return t.elts[0].id, ast.Call(ast.Name("len", ast.Load()), [it.args[0]], [])
    return None, None


def _same(a: ast.AST | None, b: ast.AST | None) -> bool:
    return a is not None and b is not None and ast.dump(a) == ast.dump(b)


def _minus_one(e: ast.expr, bound: ast.expr | None) -> bool:
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub) and _same(e.left, bound) \
        and isinstance(e.right, ast.Constant) and e.right.value == 1


def _plus_one(e: ast.expr, index: str) -> bool:
    return isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add) \
        and isinstance(e.left, ast.Name) and e.left.id == index \
        and isinstance(e.right, ast.Constant) and e.right.value == 1


def _false_last(test: ast.expr, index: str, bound: ast.expr | None) -> bool:
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if not isinstance(op, (ast.NotEq, ast.Lt)):
        return False
    if isinstance(left, ast.Name) and left.id == index:
        return _minus_one(right, bound)
    return _plus_one(left, index) and _same(right, bound)


def _encloses(body: list[ast.stmt], s: ast.stmt) -> bool:
    return any(n is s for b in body for n in bfs_walk(b))


def _binds(s: ast.stmt, name: str) -> bool:
    return isinstance(s, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in s.targets)


def only_on_last_pass(loop: ast.stmt, s: ast.stmt) -> bool:
    """``s`` runs under an ``if`` directly in ``loop``'s body whose test holds on the loop's
    last pass only: ``i == n - 1`` / ``i + 1 == n`` (either side), ``i`` the loop's index (its
    target, or the first name of a tuple target), ``n`` the ``range`` bound or ``len(...)``
    of what the loop runs over (``steps = list(enumerate(loader))``, ``for i, b in
    tqdm(steps)``, ``if i == len(steps) - 1: validate(model)``): nothing of the loop runs
    after it."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    t = loop.target
    first = t.elts[0] if isinstance(t, ast.Tuple) and t.elts else t
    if not isinstance(first, ast.Name):
        return False
    index, bound = _index_and_bound(loop)  # type: ignore[arg-type]
    for k, x in enumerate(loop.body):
        if isinstance(x, ast.If) and _encloses(x.body, s) and (_true_last(
                x.test, first.id, bound if index == first.id else None)
                or _epoch_end(x.test, loop, k)):
            return True
    return False


def _epoch_end(test: ast.expr, loop: ast.For | ast.AsyncFor, k: int) -> bool:
    """``step % len(loader) == 0`` in ``for batch in loader:`` whose body counts ``step += 1``
    on every pass before the test (no ``continue`` before it): with the count starting at a
    multiple, the test holds on the loop's last pass. Also ``... or step == limit`` when the
    body opens with ``if step >= limit: break``: that pass is the last one too."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(_epoch_end(v, loop, k) or _limit_breaks(v, loop) for v in test.values) \
            and any(_epoch_end(v, loop, k) for v in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == 0 and isinstance(test.left, ast.BinOp)
            and isinstance(test.left.op, ast.Mod) and isinstance(test.left.left, ast.Name)):
        return False
    n, m = test.left.left.id, test.left.right
    seq = loop.iter.args[0] if isinstance(loop.iter, ast.Call) and isinstance(
        loop.iter.func, ast.Name) and loop.iter.func.id in ("enumerate", "tqdm") and \
        loop.iter.args else loop.iter
    if not (isinstance(m, ast.Call) and isinstance(m.func, ast.Name) and m.func.id == "len"
            and len(m.args) == 1 and _same(m.args[0], seq)):
        return False
    before = loop.body[:k]
    return any(isinstance(b, ast.AugAssign) and isinstance(b.op, ast.Add)
               and isinstance(b.target, ast.Name) and b.target.id == n
               and isinstance(b.value, ast.Constant) and b.value.value == 1 for b in before) \
        and not any(isinstance(x, ast.Continue) for b in before for x in bfs_walk(b))


def _limit_breaks(test: ast.expr, loop: ast.For | ast.AsyncFor) -> bool:
    """``step == limit`` where the loop's first statement is ``if step >= limit: break``."""
    first = loop.body[0] if loop.body else None
    return isinstance(test, ast.Compare) and len(test.ops) == 1 \
        and isinstance(test.ops[0], ast.Eq) and isinstance(first, ast.If) \
        and any(isinstance(b, ast.Break) for b in first.body) \
        and isinstance(first.test, ast.Compare) and len(first.test.ops) == 1 \
        and isinstance(first.test.ops[0], ast.GtE) and _same(first.test.left, test.left) \
        and _same(first.test.comparators[0], test.comparators[0])


def _true_last(test: ast.expr, index: str, bound: ast.expr | None) -> bool:
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 \
            or not isinstance(test.ops[0], ast.Eq):
        return False
    for a, b in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        n = _len_call(b, bound, minus=True) if isinstance(a, ast.Name) and a.id == index \
            else _plus_one(a, index) and _len_call(b, bound, minus=False)
        if n:
            return True
    return False


def _len_call(e: ast.expr, bound: ast.expr | None, minus: bool) -> bool:
    """``e`` is ``n - 1`` (``minus``) or ``n``, ``n`` the range bound or a ``len(...)``."""
    if minus:
        if not (isinstance(e, ast.BinOp) and isinstance(e.op, ast.Sub)
                and isinstance(e.right, ast.Constant) and e.right.value == 1):
            return False
        e = e.left
    return _same(e, bound) or isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
        and e.func.id == "len" and len(e.args) == 1


def varies_by_pass(root: ast.AST, node: ast.AST) -> bool:
    """``node`` runs under an ``if`` inside a ``for`` loop of ``root`` whose test reads the
    loop's target (``for i, c in enumerate(chs): ... if i == 0: layers.append(nn.ReLU())``),
    and not only on the loop's last pass: whether it runs depends on the pass, so what it
    appends last is not known (NOTE [last pass])."""
    for loop in bfs_walk(root):
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        names = {n.id for n in bfs_walk(loop.target) if isinstance(n, ast.Name)}
        for x in bfs_walk(loop):
            if isinstance(x, ast.If) and x is not loop and (
                    _encloses(x.body, node) or _encloses(x.orelse, node)) and any(
                    isinstance(n, ast.Name) and n.id in names for n in bfs_walk(x.test)):
                return not only_on_last_pass(loop, node)  # type: ignore[arg-type]
    return False
