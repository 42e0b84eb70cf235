"""The file's functions whose result a caller backpropagates.

# NOTE [backpropagated returns]
A function is a loss function by what its callers do with its result, not by its name:
``overall = kd.before_backward_pass(loss); overall.backward()`` or ``self.objective(x).backward()``
make ``before_backward_pass`` and ``objective`` return a loss, so what they return is split into
terms and judged like any loss (NOTE [loss paths]). The callee is found by
:func:`.callees.resolve` (a function of the file, ``self.method``, or a method of an instance of a
class of this file); the receiver of ``backward()`` is the call itself or a name bound once to
it before the call.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def backpropagated(ctx: Context) -> frozenset[int]:
    """``id`` of every function of the file whose result some caller calls ``backward()`` on
    (NOTE [backpropagated returns])."""
    return ctx.memo("backpropagated", ctx.tree, lambda: frozenset(backpropagated_at(ctx)))


def backpropagated_at(ctx: Context) -> dict[int, ast.Call]:
    """``id`` of each function of :func:`backpropagated` -> the first ``backward()`` call that
    backpropagates its result."""
    def make() -> dict[int, ast.Call]:
        from gradtrace.lint.analysis.facts import unpacked_value
        out: dict[int, ast.Call] = {}
        for call, _, outer in call_sites(ctx, "backward"):
            f = call.func
            if not isinstance(f, ast.Attribute):
                continue
            where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)),
                         ctx.tree)
            v: ast.expr | None = f.value
            if isinstance(v, ast.Name):
                b = ctx.scope(where).binding_before(v.id, call.lineno)
                v = unpacked_value(b, v.id) if b is not None and \
                    isinstance(b.stmt, ast.Assign) else None
            if isinstance(v, ast.Call):
                got = resolve(ctx, where, v)
                if got is not None:
                    out.setdefault(id(got[0]), call)
        return out
    return ctx.memo("backpropagated-at", ctx.tree, make)
