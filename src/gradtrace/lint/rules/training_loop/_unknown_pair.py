"""GT509: the names unpacked from a call whose body is not in sight (NOTE [unknown pair])."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.graph_deps import graphs
from gradtrace.lint.flow import MODULE

if TYPE_CHECKING:
    from gradtrace.lint.rules.training_loop._loop import LoopFacts

# NOTE [unknown pair]
# `loss_real, loss_fake = loss_fn(d(x), d(fake))` with `loss_fn` handed in (a parameter, a
# function of another package): which argument each returned item is computed from cannot be
# seen. When each argument carries a graph of its own (two forward passes, no binding with a
# graph in common), the two items need not share one, so a `backward()` of the first frees
# nothing the second is known to need: GT509 does not claim it. A module's forward
# (`a, b = model(x, y)`) mixes its inputs and keeps the single-graph reading; so does a call
# with one graph-carrying argument (both items come from it).


def disjoint_arguments(f: LoopFacts, call: ast.Call) -> bool:
    """``call`` is not a module's and at least two of its arguments carry graphs that share
    no graph-carrying binding (NOTE [unknown pair])."""
    k = f.ctx.analysis.kind(call.func)
    if k is not None and k.what == MODULE:
        return False
    g = graphs(f.scope)
    line = call.lineno
    sets: list[set[int]] = []
    for a in [*call.args, *(kw.value for kw in call.keywords)]:
        if isinstance(a, ast.Starred):
            return False
        got = {id(_key(b)) for b in g.deps(a, line).bindings
               if b.kind != MODULE and g.carries(b)}
        if got:
            sets.append(got)
    if len(sets) < 2:
        return False
    seen: set[int] = set()
    for s in sets:
        if s & seen:
            return False
        seen |= s
    return True


def _key(b):  # type: ignore[no-untyped-def]
    """Names unpacked from one call hold one graph: their statement identifies it."""
    s = b.stmt
    return s if isinstance(s, ast.Assign) and isinstance(s.targets[0], (ast.Tuple, ast.List)) \
        else b


def handed_in(f: LoopFacts, call: ast.Call) -> bool:
    """``loss_fn(a, b)`` where ``loss_fn`` is a parameter of the function being read: the
    caller's callable runs, not a function of the file that happens to share its name."""
    fn = f.node
    if not isinstance(call.func, ast.Name) or \
            not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return False
    a = fn.args
    return call.func.id in {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}


def unknown_split(f: LoopFacts, t, d1, d2) -> bool:  # type: ignore[no-untyped-def]
    """The two losses take different names unpacked from one call whose body is not in sight
    and whose arguments carry disjoint graphs, and ``t`` reaches them through that call's
    arguments (``y_fake`` in ``l_real, l_fake = loss_fn(y_real, y_fake)``): NOTE [unknown pair]."""
    g = graphs(f.scope)
    for x in d1.bindings:
        s = x.stmt
        if not (isinstance(s, ast.Assign) and isinstance(s.targets[0], (ast.Tuple, ast.List))
                and isinstance(s.value, ast.Call)):
            continue
        call = s.value
        if not (handed_in(f, call) or f.ctx.analysis.callee(call, f.node) is None) \
                or not disjoint_arguments(f, call):
            continue
        n1 = {y.name for y in d1.bindings if y.stmt is s}
        n2 = {y.name for y in d2.bindings if y.stmt is s}
        if n1 and n2 and not n1 & n2 and any(
                t is b for a in call.args for b in g.deps(a, call.lineno).bindings):
            return True
    return False
