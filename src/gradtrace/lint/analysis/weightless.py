"""A callee the analysis layer knows to be a torch module without weights of its own.

# NOTE [weightless callee]
``loss = criterion(out, y)`` is as live as its arguments when ``criterion`` holds no weights
(:func:`.cuts.pure_loss`). The spelling ``criterion = nn.MSELoss()`` said so before; the same
value reached in other ways said nothing, so a ``.data`` or ``.detach()`` on the model's output
was not followed into the loss. Here the callee's kind (NOTE [kinds]) decides, wherever the
value comes from: a method of the class or a function of the file that returns a torch loss
(``criterion = self._get_loss_fn()``, ``return nn.MSELoss()`` on every path), a parameter every
caller passes one to (NOTE [parameter kinds]), a global, a ``self.<x>`` set in ``__init__``.
A module without weights is a torch loss class (not the adaptive softmax, which has weights)
or a torch layer that holds none (``nn.LogSoftmax(dim=1)``, ``nn.ReLU()``, pooling, dropout:
``logsoftmax = nn.LogSoftmax(dim=1)`` in a loss helper). A user class, a model, a factory of
another library: not weightless (an ArcFace head holds weights), the caller keeps its answer.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.foreign_weightless import foreign_weightless_value
from gradtrace.lint.analysis.weightless_classes import weightless_class, weightless_file_class

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope
    from gradtrace.lint.analysis.origins import Tracer


def weightless_kind(cls: str | None, ctx: Context) -> bool:
    """A torch module without weights, or a module class of the file holding none
    (NOTE [weightless class of the file])."""
    return weightless_class(cls) or weightless_file_class(cls, ctx)


def weightless_value(t: Tracer, value: ast.expr | None, scope: Scope, depth: int = 0) -> bool:
    """``value`` (bound to a callee in ``scope``) is, by its kind, a weightless torch module."""
    if value is None or depth > 2:
        return False
    a = t.ctx.analysis
    k = a.kind(value, scope)
    if k is not None:
        return k.what == MODULE and (weightless_kind(k.cls, t.ctx)
                                    or foreign_weightless_value(value, scope, t.ctx))
    if isinstance(value, ast.Name):  # `judge` handed on, bound by a call of a chooser
        b = scope.binding_before(value.id, value.lineno)
        return b is not None and isinstance(b.stmt, ast.Assign) and weightless_value(
            t, unpacked_value(b, value.id), scope, depth + 1)
    fn = a.callee(value, scope.node) if isinstance(value, ast.Call) else None
    if fn is None:
        return False
    # a function of the file (a method of the class) choosing among several: every return
    # is one (`return nn.MSELoss()` in one arm, `return nn.L1Loss()` in another)
    inner = t.ctx.scope(fn)
    returns = [s for s in inner.stmts if isinstance(s, ast.Return)]
    return bool(returns) and all(
        s.value is not None and (r := a.kind(s.value, inner, s.lineno + 1)) is not None
        and r.what == MODULE and weightless_class(r.cls) for s in returns)


def weightless_parameter(t: Tracer, name: str) -> bool:
    """The parameter ``name`` of the traced function is, at every call of the file, passed a
    weightless torch module (NOTE [parameter kinds])."""
    from gradtrace.lint.analysis.callees import param_kind
    fn = t.scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in name:
        return False
    k = param_kind(t.ctx.analysis, fn, name)
    if k is not None:
        return k.what == MODULE and weightless_kind(k.cls, t.ctx)
    passed = t.ctx.analysis.argument_values(fn, name)  # every call passes one
    return bool(passed) and all(weightless_value(t, v, t.ctx.scope(where), 1)
                                for v, where in passed)

