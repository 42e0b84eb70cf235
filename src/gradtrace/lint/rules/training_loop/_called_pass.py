"""GT507 through a per-pass function: the loop calls a function of the file that runs the
backward, and the graph reused is a module-level value that function reads.

# NOTE [reused through a per-pass function]
``y = t @ a`` computed once at file level and read by ``def step(): ... loss(t @ (x + y))
.backward()``, which a file-level loop calls on every pass, is the same fact as a value made
before a loop and backwarded inside it (GT507): the first call's ``backward()`` frees ``y``'s
saved tensors and the second raises 'Trying to backward through the graph a second time'. The
loop is in one scope, the backward in another; the value links them as a global the function
reads and never binds (no ``global`` statement, no parameter of that name). The same checks
as GT507's decide the value's graph: a module-like call of the file (proven as GT507 proves
it) or a requires-grad leaf through an operation that saves tensors; a value rebound in the
loop, under ``no_grad``, or feeding on itself is left alone.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.analysis.proven_graph import proven_source
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.training_loop._loop import Backward, LoopFacts, facts
from gradtrace.lint.rules.training_loop._reused_graph import _leaf_graph

LOOPS = (ast.For, ast.AsyncFor, ast.While)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def reused_globals(f: LoopFacts, ctx: Context
                   ) -> Iterator[tuple[Binding, Backward, ast.stmt, str]]:
    """(file-level binding, the function's backward that frees it, the file-level loop that
    calls the function, what makes the graph) for the function ``f.node``
    (NOTE [reused through a per-pass function])."""
    fn = f.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or not isinstance(file_parents(ctx).get(id(fn)), ast.Module):
        return
    loop = _calling_loop(ctx, fn.name)
    if loop is None:
        return
    params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    declared = {n for s in walk(fn) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
    inner = graphs(f.scope)
    m = facts(ctx, ctx.tree)
    g = graphs(m.scope)
    done: set[int] = set()
    for b in f.backwards:
        if b.loss is None or b.retains or not b.accumulates or f.loops_of(b.stmt):
            continue
        exprs = [b.loss, *(value_of(d) for d in inner.deps(b.loss, b.stmt.lineno).bindings)]
        free = {n.id for e in exprs if e is not None for n in walk(e)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                and n.id not in f.scope.bindings and n.id not in params
                and n.id not in declared}
        for name in sorted(free):
            bs = m.scope.bindings.get(name, ())
            if len(bs) != 1 or id(bs[0].stmt) in done:
                continue  # rebound at file level (in the loop, or before it): unsure
            t = bs[0]
            if t.line >= loop.lineno or t.no_grad or isinstance(t.stmt, ast.AugAssign):
                continue
            module = g.first_module_call(t) if g.direct(t) and proven_source(g, t) else None
            source = f"by `{module}(...)`" if module else None
            if source is None and (leaf := _leaf_graph(g, t)) is not None:
                source = f"from `{leaf}`, which requires grad,"
            if source is not None:
                done.add(id(t.stmt))
                yield t, b, loop, source


def _calling_loop(ctx: Context, name: str) -> ast.stmt | None:
    """The first file-level loop (outside any function or class) that calls ``name(...)``."""
    return ctx.memo("gt507-calling-loops", ctx.tree, lambda: _calling_loops(ctx)).get(name)


def _calling_loops(ctx: Context) -> dict[str, ast.stmt]:
    """name -> the first file-level loop calling ``name(...)``, for the whole file at once."""
    parents = file_parents(ctx)
    out: dict[str, ast.stmt] = {}
    for n in walk(ctx.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id not in out:
            p, loop = parents.get(id(n)), None
            while p is not None and not isinstance(p, SCOPES):
                if isinstance(p, LOOPS):
                    loop = p
                p = parents.get(id(p))
            if p is None and loop is not None:
                out[n.func.id] = loop
    return out
