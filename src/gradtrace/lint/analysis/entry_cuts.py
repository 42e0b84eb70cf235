"""Entries of a returned dict that a function cuts, read where the caller subscripts them.

# NOTE [returned dict entry]
``return {"deformed": deformed, "weight": weight}`` from a ``forward`` (or any function of
the file) hands each key its own value: ``out = net(x)`` then ``out["weight"]`` is that
entry, not the whole dict. When every ``return`` of the function gives a dict literal holding
the constant key (directly, or through a name bound once to one), and the entry's value there
traces to no live value and to at least one cut (the helper's tracer, arguments live: the
reading of NOTE [unpacked cut element], key by key), the subscript is that cut, reached
through the call: the term built from ``out["weight"]`` has no graph whatever the other
entries carry. The same guards as :func:`~gradtrace.lint.analysis.helper_cuts.element_cut`
(grad-off decorators only, no ``backward()``, a short body). A dict the function fills later
(``out[k] = v``, ``out.update(...)``), a ``**`` entry, or a key spelled by a name: no fact.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.cuts import Cut, Trace
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.analysis.origins import Tracer

Def = ast.FunctionDef | ast.AsyncFunctionDef


def entry_cut(ctx: Context, fn: Def, key: str, tracer: Callable[[], Tracer]) -> Cut | None:
    """The cut ``fn`` makes on the entry ``key`` of every dict it returns, or None
    (NOTE [returned dict entry]); ``tracer`` makes ``fn``'s helper tracer."""
    memo: dict[tuple[int, str], Cut | None] = ctx.memo("gt1-entry-cuts", ctx.tree, dict)
    k = (id(fn), key)
    if k not in memo:
        memo[k] = None  # recursion guard
        memo[k] = _entry_cut(ctx, fn, key, tracer)
    return memo[k]


def _entry_cut(ctx: Context, fn: Def, key: str, tracer: Callable[[], Tracer]) -> Cut | None:
    if len(fn.body) > 60:
        return None
    scope = ctx.scope(fn)
    returns = [s for s in scope.stmts if isinstance(s, ast.Return)]
    if not returns:
        return None
    t = ctx.memo("gt1-helper-tracer", fn, tracer)
    cuts: list[Cut] = []
    for r in returns:
        d, at = _dict_of(r, scope, fn)
        if d is None:
            return None
        v = next((v for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant)
                  and k.value == key), None)
        if v is None or any(k is None for k in d.keys):
            return None
        tr = t.trace(v, at, at.lineno)
        if tr.live or not tr.cuts:
            return None
        cuts.extend(tr.cuts)
    return min(cuts, key=lambda c: (c.node.lineno, c.node.col_offset)) if cuts else None


def _dict_of(r: ast.Return, scope: object, fn: Def) -> tuple[ast.Dict | None, ast.stmt]:
    """The dict literal ``r`` returns, and the statement that builds it."""
    v = r.value
    if isinstance(v, ast.Dict):
        return v, r
    if not isinstance(v, ast.Name):
        return None, r
    bs = scope.bindings.get(v.id, [])  # type: ignore[attr-defined]
    if len(bs) != 1 or not isinstance(bs[0].value, ast.Dict) \
            or not isinstance(bs[0].stmt, ast.Assign) or _filled(fn, v.id):
        return None, r
    return bs[0].value, bs[0].stmt


def _filled(fn: Def, name: str) -> bool:
    """``name[k] = v``, ``name.update(...)``, ``name.setdefault(...)`` or ``del name[k]``
    somewhere in ``fn``."""
    for n in walk(fn):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                and n.value.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == name \
                and n.func.attr in ("update", "setdefault", "pop", "__setitem__"):
            return True
    return False


def subscript_cut(t: Tracer, e: ast.Subscript, use: ast.stmt | None, line: int,
                  callee: Callable[[ast.Call, int], Def | None],
                  tracer: Callable[[Def], Callable[[], Tracer]]) -> Trace | None:
    """``out["weight"]`` with ``out = net(x)`` (bound once), or ``net(x)["weight"]``: the
    cut the callee makes on that entry, reached through the call
    (NOTE [returned dict entry]); None: no such fact. ``callee`` resolves a call of the
    file's function."""
    if not (isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, str)):
        return None
    call, at = e.value, line
    if isinstance(call, ast.Name):
        bs = t.bindings_at(call.id, use, line)
        if len(bs) != 1 or not isinstance(bs[0].stmt, ast.Assign) \
                or not isinstance(bs[0].value, ast.Call) or len(bs[0].stmt.targets) != 1 \
                or not isinstance(bs[0].stmt.targets[0], ast.Name):
            return None
        call, at = bs[0].value, bs[0].line
    if not isinstance(call, ast.Call):
        return None
    fn = callee(call, at)
    if fn is None:
        return None
    cut = entry_cut(t.ctx, fn, e.slice.value, tracer(fn))
    if cut is None or fn.name != "forward" and not t.args_trace(call, use, line).live:
        return None
    return Trace(False, (Cut(cut.kind, cut.node, cut.operand,
                             ((f"{fn.name}()", call.lineno),) + cut.via),))
