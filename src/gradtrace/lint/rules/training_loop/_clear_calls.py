"""GT518 through a method: a method that clears the gradients and runs a backward, called on
every pass of a loop, and a method that steps the same optimizer, called once after it.

# NOTE [clearing method per pass]
``trainer.forward_backward(mb)`` in a loop over micro-batches, then ``trainer.optim_step()``
after the loop (torchtitan's RL ``PolicyTrainer``, the controller of an RL or a pipeline
trainer): when ``forward_backward`` clears ``self.<opt>`` before its own backward and steps
nothing, and ``optim_step`` steps ``self.<opt>`` without clearing it first, each pass erases
the gradients of the passes before it and the step applies the last micro-batch's gradient
alone: GT518's mechanism, one call away on each side. The clear must be a statement of the
method's own body (no ``if``, no loop), the call a statement of the loop's own body, the step
method called on the same receiver in the first statement after the loop that uses that
receiver, and the loop must call nothing that steps that optimizer.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._loop import LoopFacts, Named, facts

LOOPS = (ast.For, ast.AsyncFor, ast.While)
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def clearing_calls(fn: ast.AST, ctx: Context
                   ) -> Iterator[tuple[Named, ast.Call, ast.stmt, ast.Call]]:
    """(the clear in ``fn``, a call of ``fn`` on every pass of a loop, that loop, the call
    after the loop that steps the cleared optimizer) (NOTE [clearing method per pass])."""
    if not isinstance(fn, DEFS) or ctx.analysis.class_of(fn) is None:
        return
    f = facts(ctx, fn)
    if f.steps or not f.zero_grads:
        return
    top = {id(s) for s in fn.body}
    z = next((z for z in f.zero_grads if id(z.stmt) in top and z.receiver.startswith("self.")
              and any(b.accumulates and id(b.stmt) in top and f.before(z.stmt, b.stmt)
                      for b in f.backwards)), None)
    if z is None:
        return
    attr = z.receiver[len("self."):]
    for call, stmt, outer in call_sites(ctx, fn.name):
        where = next((o for o in reversed(outer) if isinstance(o, DEFS)), ctx.tree)
        if where is fn or not isinstance(call.func, ast.Attribute):
            continue
        got = resolve(ctx, where, call)
        if got is None or got[0] is not fn:
            continue
        recv = got[1].get("self")
        loop = next((o for o in reversed(outer) if isinstance(o, LOOPS + DEFS)), None)
        if recv is None or not isinstance(loop, LOOPS) or not any(s is stmt for s in loop.body):
            continue
        cf = facts(ctx, where)
        target = f"{recv}.{attr}"
        if any(_steps(cf, ctx, where, s, target) for s in _own(loop)):
            continue  # the loop steps it itself
        after = _step_after(cf, ctx, where, loop, recv, target)
        if after is not None:
            yield z, call, loop, after


def _own(loop: ast.stmt) -> list[ast.stmt]:
    return [s for s in walk(loop) if isinstance(s, ast.stmt) and s is not loop]


def _steps(cf: LoopFacts, ctx: Context, where: ast.AST, s: ast.stmt,
           target: str) -> ast.Call | None:
    """The call in ``s`` that steps ``target``: ``target.step()`` itself, or a method of this
    file whose own body steps ``self.<attr>`` (its receiver mapped to ``self``)."""
    for st in cf.steps:
        if st.stmt is s and st.optimizer == target:
            return st.call
    for n in walk(s):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        got = resolve(ctx, where, n)
        if got is None or not isinstance(got[0], DEFS):
            continue
        callee, mapping = got
        recv = mapping.get("self")
        if recv is None or not target.startswith(recv + "."):
            continue
        inner = "self." + target[len(recv) + 1:]
        mf = facts(ctx, callee)
        top = {id(x) for x in callee.body}
        st = next((x for x in mf.steps if x.optimizer == inner and id(x.stmt) in top), None)
        if st is not None and not any(z.receiver == inner and mf.before(z.stmt, st.stmt)
                                      for z in mf.zero_grads):
            return n
    return None


def _step_after(cf: LoopFacts, ctx: Context, where: ast.AST, loop: ast.stmt, recv: str,
                target: str) -> ast.Call | None:
    """The step of ``target`` in the first statement after ``loop`` (same block) that uses
    ``recv``; None when that statement steps nothing, or clears first."""
    for s in cf.scope.stmts:
        if s.lineno <= (loop.end_lineno or loop.lineno) or not cf.before(loop, s) \
                or isinstance(s, (*LOOPS, ast.If, ast.With, ast.Try, *DEFS)):
            continue
        if not any(dotted(n) == recv for n in walk(s) if isinstance(n, (ast.Name, ast.Attribute))):
            continue
        return _steps(cf, ctx, where, s, target)
    return None
