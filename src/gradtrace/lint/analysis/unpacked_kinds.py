"""What a name unpacked from a call of the file's function is, read in that function's returns.

# NOTE [unpacked element kinds]
``loss, inter, d_ap, d_an = criterion(feats, labels)`` binds ``loss`` to element 0 of what
``criterion`` returns. When the call runs a function of the file (``called_function``: a
helper, ``self.method``, a module instance's ``forward`` found through the instance's kind, the
callers' arguments included, NOTE [parameter kinds]) and every ``return`` of that function is a
tuple of as many values whose element at that place is a Python number (``float(...)``,
``.item()``, a numeric constant) or a NumPy value in the function's own flow facts (a returned
name: on every path that reaches the ``return``), the name is that too, whatever the other
elements are: Deep_Metric's trainer unpacked ``(mean_pos_sim, mean_neg_sim, prec, loss)`` in
the wrong order and called ``.backward()`` on a float. A name bound to the whole call (``loss =
criterion(x, y)``) is read the same way, from every ``return``'s whole value. Any ``return`` of
another shape (a bare name, a tuple of another width, a starred element), a bare ``return``, or
a function that is a generator gives nothing. The function is read once per (function, place,
width); nothing is followed further.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.reach import called_function, reaching
from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.flow import NUMBER, NUMPY
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope


def unpacked_kind(ctx: Context, scope: Scope, b: Binding) -> tuple[str, ast.AST] | None:
    """(NUMBER or NUMPY, the function) when the binding ``b`` unpacks such an element from a
    call of a function of the file (NOTE [unpacked element kinds]); None otherwise."""
    s = b.stmt
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Call)):
        return None
    if isinstance(s.targets[0], ast.Name):  # `loss = criterion(x, y)`: the whole result
        fn = called_function(s.value, scope, s.lineno)
        kind = element_kind(ctx, fn, -1, 0) if fn is not None else None
        return (kind, fn) if kind is not None else None
    if not isinstance(s.targets[0], ast.Tuple):
        return None
    elts = s.targets[0].elts
    if any(isinstance(t, ast.Starred) for t in elts):
        return None
    spots = [i for i, t in enumerate(elts) if dotted(t) == b.name]
    if len(spots) != 1:
        return None
    fn = called_function(s.value, scope, s.lineno)
    if fn is None:
        return None
    kind = element_kind(ctx, fn, spots[0], len(elts))
    return (kind, fn) if kind is not None else None


def element_kind(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, j: int,
                 width: int) -> str | None:
    """NUMBER or NUMPY when element ``j`` of every ``width``-tuple ``fn`` returns is one (width
    0: every returned value is one; NOTE [unpacked element kinds]); None otherwise."""
    memo: dict[tuple[int, int, int], str | None] = ctx.memo("unpacked-kinds", ctx.tree, dict)
    key = (id(fn), j, width)
    if key not in memo:
        memo[key] = _element_kind(ctx, fn, j, width)
    return memo[key]


def _element_kind(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, j: int,
                  width: int) -> str | None:
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in walk(fn)):
        return None
    rets = list(returns(fn.body))
    if not rets:
        return None
    scope = ctx.scope(fn)
    got: set[str | None] = set()
    for r in rets:
        v = r.value
        if width == 0:  # the whole value
            got.add(_kind(scope, v, r))
        elif not isinstance(v, ast.Tuple) or len(v.elts) != width \
                or any(isinstance(e, ast.Starred) for e in v.elts):
            return None
        else:
            got.add(_kind(scope, v.elts[j], r))
        if len(got) > 1 or not got <= {NUMBER, NUMPY}:
            return None
    return got.pop()


def _kind(scope: Scope, e: ast.expr | None, r: ast.Return) -> str | None:
    """The kind of ``e`` returned at ``r``: a name takes the kind of every binding that may
    reach the ``return`` (NOTE [binding policy]), one kind or none: poutyne's
    ``if not return_loss_tensor: loss = float(loss.detach())`` leaves the tensor binding on the
    other path."""
    if e is None:
        return None
    if isinstance(e, ast.Name):
        kinds = {b.kind for b in reaching(scope, e.id, r.lineno, r)}
        return kinds.pop() if len(kinds) == 1 else None
    return scope.kind(e, r.lineno)

