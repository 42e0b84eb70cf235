"""A clear at the top of the outer (epoch) loop of an accumulation window that spans its passes,
for GT512.

# NOTE [window across epochs]
``last_step = -1`` before the epoch loop, ``optimizer.zero_grad()`` at the top of each epoch,
then in the batch loop ``loss.backward()`` and ``if ni - last_step >= accumulate:
optimizer.step(); optimizer.zero_grad(); last_step = ni`` with ``ni = i + nb * epoch``: the
window's count is bound once, before the epoch loop, and moved only by the step's ``if``, so
a window left open at the end of an epoch is meant to close in the next one; the epoch's first
clear erases the micro-batches it already holds, and the next step applies only the rest
(ultralytics' trainer, fixed by moving the clear before the epoch loop). A window counted from
the batch loop's own index (``(i + 1) % accum``), or a count the epoch loop binds again, starts
anew with each epoch: the clear there only drops a tail no step was going to use.
Holds no rule.
"""
from __future__ import annotations

import ast
from typing import Callable, Iterable, Iterator

from gradtrace.lint.analysis.steps import Step
from gradtrace.lint.context import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._loop import LoopFacts, facts
from gradtrace.lint.rules.training_loop._periods import conditional
from gradtrace.lint.rules.training_loop.zero_grad import covers


def epoch_clears(f: LoopFacts, periodic: Iterable[tuple], guard_of: Callable) -> Iterator[tuple]:
    """(clear, step, backward, guard) for each periodic step whose window spans the passes of
    the loop around its own, which clears first (NOTE [window across epochs]). A call of a
    method of the class that steps and clears one optimizer (``self.optimizer_step()``) is such
    a step too (``guard_of``: the periodic ``if`` around a statement in a loop)."""
    for s, loop, guard, _mods in [*periodic, *_helper_steps(f, guard_of)]:
        outer = next((o for o in reversed(f.loops_of(loop)) if o is not loop
                      and f.inside(loop, o)), None)
        if outer is None or not _carried(f, guard, loop, outer):
            continue
        backs = [b for b in f.backwards if f.inside(b.stmt, loop) and f.before(b.stmt, guard)
                 and not conditional(f, b.stmt, loop)]
        z = next((z for z in f.zero_grads if f.inside(z.stmt, outer)
                  and not f.inside(z.stmt, loop) and f.before(z.stmt, loop)
                  and covers(f, z, s) and not conditional(f, z.stmt, outer)), None)
        if z is not None and backs:
            yield z, s, backs[0], guard


def _helper_steps(f: LoopFacts, guard_of: Callable) -> Iterator[tuple]:
    """(step, loop, guard, []) for ``self.<method>()`` in a loop under a periodic ``if``, the
    method (of the class, no loop of its own) stepping and clearing one optimizer."""
    cls = f.ctx.analysis.class_of(f.node) if isinstance(f.node, FUNCTION_TYPES) else None
    if cls is None:
        return
    for st in f.scope.stmts:
        call = st.value if isinstance(st, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
                and f.loops_of(st)):
            continue
        m = cls.method(call.func.attr)
        if m is None or m is f.node:
            continue
        mf = facts(f.ctx, m)
        opts = {x.optimizer for x in mf.steps if not x.closure and not mf.loops_of(x.stmt)}
        if len(opts) != 1 or not any(z.receiver in opts for z in mf.zero_grads):
            continue
        loop = f.loops_of(st)[-1]
        got = guard_of(f, st, loop)
        if got is not None:
            yield Step(call, st, opts.pop(), False), loop, got[0], got[1]


def _carried(f: LoopFacts, guard: ast.If, loop: ast.stmt, outer: ast.stmt) -> bool:
    """A name of the guard's test that the guard binds again (the window's count), bound
    before ``outer`` and, in ``outer``, only in the batch ``loop`` (``done += 1`` there too)."""
    names = {n.id for n in walk(guard.test) if isinstance(n, ast.Name)}
    for name in names:
        inside = [st for st in f.within(outer) if name in _bound(st)]
        if not any(f.inside(st, guard) for st in inside) \
                or any(not f.inside(st, loop) for st in inside):
            continue
        before = [st for st in f.scope.stmts if st.lineno < outer.lineno and name in _bound(st)]
        if before:
            return True
    return False


def _bound(st: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(st, ast.Assign):
        targets = st.targets
    elif isinstance(st, (ast.AugAssign, ast.AnnAssign)):
        targets = [st.target]
    else:
        return set()
    return {dotted(n) or "" for t in targets for n in walk(t)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
