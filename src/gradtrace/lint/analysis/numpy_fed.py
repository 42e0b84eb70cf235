"""Calls that hand a function NumPy values only, to a function that makes no graph itself.

# NOTE [numpy-fed calls]
``f1_loss(np.array(self.y_true), np.array(self.y_pred))``: a call whose every argument is a
NumPy array or a Python number (by the data-flow kinds at the call, or a ``numpy.array``-like
call itself), of a function whose body calls no function by name and nothing of torch (only
methods of the values it is given: ``.sum()``, ``.mean()``), returns no graph: nothing it
computes can reach a backward, wherever its value goes. For the loss evidence
(NOTE [loss evidence]) such a call is one that backpropagates nothing (False), not an unknown: the F1
"loss" of koukyo1994/kaggle-rfcx's Kaggle scripts (unseen40), an epoch meter's score stored on
``self`` and read through a property nothing follows. A function that calls a model, a helper
or ``torch.from_numpy`` may build a graph from the arrays (or from a global model): not given.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.flow import NUMBER, NUMPY, NUMPY_FUNCS
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def numpy_fed(ctx: Context, fn: Fn, call: ast.Call, where: ast.AST) -> bool:
    """NOTE [numpy-fed calls]: ``call`` (of ``fn``, made in ``where``) gives NumPy values
    only, and ``fn`` makes no graph of its own."""
    args = [*call.args, *(k.value for k in call.keywords)]
    if not args or any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords) or not _makes_no_graph(ctx, fn):
        return False
    scope = ctx.scope(where)
    return all(isinstance(a, ast.Constant) or isinstance(a, ast.Call) and (
        ctx.qualified_name(a.func) or "") in NUMPY_FUNCS
        or scope.kind(a, call.lineno) in (NUMBER, NUMPY) for a in args)


def _makes_no_graph(ctx: Context, fn: Fn) -> bool:
    def make() -> bool:
        for n in walk(fn):
            if isinstance(n, ast.Call) and (
                    not isinstance(n.func, ast.Attribute)
                    or (ctx.qualified_name(n.func) or "").startswith("torch")):
                return False
        return not fn.decorator_list
    return ctx.memo("makes-no-graph", fn, make)  # type: ignore[no-any-return]
