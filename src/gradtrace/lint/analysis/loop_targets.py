"""What a ``for`` target of a function is an element of (NOTE [elements of a model's output]).

# NOTE [elements of a model's output]
A loop target is data when the loop walks a loader (``for x, y in loader``). A target that
walks a value the function made by a call (``current_qs = self.critic(obs)``, then ``for
current_q in current_qs: loss += self.critic.loss(current_q, target_q)``: SAC's two Q heads)
is an element of that call's result: as live (or as dead) as the call. Read only for a plain
name bound once in the function by an assignment of a call, never a loader (by kind or by the
vocabulary's ``DATA_ITER_RE``), a parameter or another loop's target.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import LOADER
from gradtrace.lint.analysis.reach import value_of
from gradtrace.lint.analysis.vocabulary import DATA_ITER_RE
from gradtrace.lint.flow import PARAMETER, PARAMS

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def iterated_call(ctx: Context, scope: Scope, loop: ast.For | ast.AsyncFor) -> ast.Call | None:
    """The call whose result ``loop`` walks (``outs = model(x); for o in outs``), or None."""
    it = loop.iter
    if not isinstance(it, ast.Name) or DATA_ITER_RE.search(it.id):
        return None
    bs = scope.bindings.get(it.id, ())
    if len(bs) != 1 or bs[0].line >= loop.lineno or bs[0].kind in (PARAMETER, PARAMS) \
            or not isinstance(bs[0].stmt, ast.Assign):
        return None
    v = value_of(bs[0])
    if not isinstance(v, ast.Call) or v is not bs[0].stmt.value:
        return None
    k = ctx.analysis.kind(it, scope, loop.lineno)
    return None if k is not None and k.what == LOADER else v
