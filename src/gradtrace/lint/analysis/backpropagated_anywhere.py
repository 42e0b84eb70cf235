"""Whether what a function returns is backpropagated by a caller, in its file or another.

# NOTE [backpropagated across files]
A loss helper may return a Python number beside its tensor terms on purpose (a metric, a value
to log), so the loss-path rules leave a returned ``.item()`` to the callers
(NOTE [loss paths]). When a caller backpropagates the value (``loss = reg_loss(moved, fixed, flow)`` then
``loss.backward()``), the helper's return *is* the loss: a term turned into a number there
(``ncc(fixed, moved) + lam * smooth(flow).item()``) is a constant, and the part of the model
only that term reached gets no gradient from it. :func:`backpropagated_anywhere` is True for a
function of the file when one call of it reaches a backward: a receiver of ``backward()``
bound to its call (NOTE [backpropagated returns]), a value of the calling function that it
backpropagates (NOTE [loss evidence]'s :func:`.loss_evidence.reaches_backward`, not a value
handed to ``self.log``), in this file or in another file of the project that imports it
(NOTE [reverse index]). Asked only once a returned term is found cut to a number, so the
other files are read for those functions alone.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.backpropagated import backpropagated
from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.loss_callers import project_evidence
from gradtrace.lint.analysis.loss_evidence import logged_value, reaches_backward

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def backpropagated_anywhere(ctx: Context, fn: Fn) -> bool:
    """NOTE [backpropagated across files]: a call of ``fn`` reaches a backward."""
    def make() -> bool:
        if id(fn) in backpropagated(ctx):
            return True
        if any(_reaches(ctx, where, call) for call, where in function_sites(ctx.analysis, fn)
               or ()):
            return True
        return bool(project_evidence(ctx, fn, _reaches))
    return ctx.memo("backpropagated-anywhere", fn, make)  # type: ignore[no-any-return]


def _reaches(ctx: Context, where: ast.AST, call: ast.Call) -> bool | None:
    """One call's value reaches a backward of the function (or script) making it."""
    if logged_value(ctx, where, call):
        return False
    return reaches_backward(ctx, where, call)
