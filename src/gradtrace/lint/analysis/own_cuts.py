"""Helpers that cut a graph of their own: the result has no graph whatever the call is given.

# NOTE [own graph cut]
A helper that cuts everything it returns (NOTE [helper cuts]) was read as "given data, it
returns data" when its caller hands it no live value: a cut of its arguments only. But a
method (or a function reading a global model) may build the graph it cuts from state of its
own: ``def features(self, x): return self.model(x).detach()`` cuts the output of
``self.model`` whatever ``x`` is (data from the loader, as a training step's batch always
is). :func:`cuts_own_graph` asks the helper's tracer with its arguments dead (the reading of
:func:`~gradtrace.lint.analysis.origins.argument_returns`): a ``.detach()``-style cut whose
operand is live there cuts a graph of the helper's own, and the call is then a cut at the
helper's line whatever its arguments are (in this file, or in another one through the
project index); the rules around it still ask that nothing else of the loss be live. A
grad-off region in such a helper is the GT2 tracer's (NOTE [no-grad helpers]), which reads
it so already.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import Cut
from gradtrace.lint.analysis.grad_off_returns import GRAD_OFF
from gradtrace.lint.analysis.multi_views import GRAPH_FUNCS, SAME_GRAPH
from gradtrace.lint.analysis.origins import origins
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Def = ast.FunctionDef | ast.AsyncFunctionDef


def cuts_own_graph(ctx: Context, fn: Def, cut: Cut) -> bool:
    """``fn``'s cut ``cut`` (one of its own lines) cuts a graph ``fn`` builds from its own
    state, not from its arguments (NOTE [own graph cut])."""
    memo: dict[int, bool] = ctx.memo("own-graph-cuts", ctx.tree, dict)
    if id(fn) not in memo:
        memo[id(fn)] = False  # recursion guard
        memo[id(fn)] = cut.via == () and _own(ctx, fn, cut)
    return memo[id(fn)]


def _own(ctx: Context, fn: Def, cut: Cut) -> bool:
    if cut.kind == GRAD_OFF:
        return False  # read by the GT2 tracer already (NOTE [no-grad helpers])
    t = origins(ctx, fn, arguments_live=False)
    stmt = None  # the innermost statement holding the cut (``stmts`` is in pre-order)
    for s in ctx.scope(fn).stmts:
        if any(n is cut.node for n in walk(s)):
            stmt = s
    return stmt is not None and t.trace(cut.operand, stmt, stmt.lineno).live


def one_tensor(v: ast.expr | None, scope: object, line: int, ctx: Context) -> bool:
    """``v`` (returned at ``line``) is surely one tensor, never a tuple: an arithmetic
    expression, a torch function or tensor method that gives one tensor
    (``torch.sum(...)``, ``x.view(...)``), or a name every binding of which before ``line``
    is one. A function returning ``deformed`` on one path and ``deformed, w, u`` on another
    hands a 3-name unpacking only the tuple (NOTE [unpacked cut element])."""
    if isinstance(v, ast.Name):
        bs = [b for b in scope.bindings.get(v.id, ())  # type: ignore[attr-defined]
              if b.line <= line]
        return bool(bs) and all(isinstance(b.stmt, ast.Assign) and b.value is not None
                                and b.value is not v and one_tensor(b.value, scope, b.line, ctx)
                                and not isinstance(b.stmt.targets[0], ast.Tuple) for b in bs)
    if isinstance(v, ast.BinOp):
        return isinstance(v.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.MatMult, ast.Pow))
    if isinstance(v, ast.Call):
        q = ctx.qualified_name(v.func) or ""
        if q.startswith("torch.") and q.rsplit(".", 1)[1] in GRAPH_FUNCS | {"sum", "mean"}:
            return True
        return isinstance(v.func, ast.Attribute) and not q and v.func.attr in SAME_GRAPH
    return False


def plain_decorator(d: ast.expr) -> bool:
    """``@staticmethod`` / ``@classmethod``: how the method is bound, nothing about what it
    computes; a helper so decorated is read as an undecorated one (NOTE [helper cuts])."""
    return isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
