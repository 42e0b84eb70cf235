"""A value a helper computes only to hand it back in a tuple position every caller drops.

# NOTE [dropped return element]
``def get_cos_sin(x, y): ...; sin = (1 - cos * cos).sqrt(); return cos, sin`` whose every
call is ``cos, sin = self.get_cos_sin(a, b)`` in a function that never reads ``sin``: what
the helper binds to ``sin`` reaches no caller's value, so nothing differentiates it (a
Causal-Norm classifier keeps only the cosine). Asked for a statement binding one name whose
every read in the helper is an element of a returned tuple (every ``return`` with a value
gives a tuple of one length); every call of the helper (at least one) must unpack its result
into a tuple of that length whose element at each such position is ``_`` or a name its
function never reads. A call used any other way (passed on, indexed, kept whole) reads it.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable, Iterable

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


Sites = Iterable[tuple[ast.Call, ast.AST]]


def dropped_element(ctx: Context, stmt: ast.stmt | None, fn: ast.AST | None,
                    callers: Callable[[Context, ast.AST], Sites]) -> bool:
    """What ``stmt`` (in the helper ``fn``) binds reaches only tuple positions of ``fn``'s
    returns that every caller drops (NOTE [dropped return element]); ``callers(ctx, fn)`` gives
    the (call, function around it) of each call of ``fn``."""
    if not (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(
            stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    rets = [r.value for r in walk(fn) if isinstance(r, ast.Return) and r.value is not None]
    if not rets or not all(isinstance(v, ast.Tuple) for v in rets) \
            or len({len(v.elts) for v in rets}) != 1:  # type: ignore[union-attr]
        return False
    size = len(rets[0].elts)  # type: ignore[union-attr]
    spots = [(i, e) for v in rets for i, e in enumerate(v.elts)  # type: ignore[union-attr]
             if isinstance(e, ast.Name) and e.id == name]
    reads = [n for n in walk(fn) if isinstance(n, ast.Name) and n.id == name
             and isinstance(n.ctx, ast.Load)]
    if not spots or len(reads) != len(spots):
        return False  # read elsewhere in the helper (or not handed back at all)
    positions = {i for i, _ in spots}
    sites = list(callers(ctx, fn))
    return bool(sites) and all(_drops(ctx, call, outer, positions, size)
                               for call, outer in sites)


def _drops(ctx: Context, call: ast.Call, outer: ast.AST, positions: set[int],
           size: int) -> bool:
    st = ctx.scope(outer).statement_of(call)
    if not (isinstance(st, ast.Assign) and st.value is call and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Tuple) and len(st.targets[0].elts) == size):
        return False
    elts = st.targets[0].elts
    names = [e.id for i, e in enumerate(elts) if i in positions and isinstance(e, ast.Name)]
    if len(names) != len(positions):
        return False
    read = {n.id for n in walk(outer) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return all(n == "_" or n not in read for n in names)
