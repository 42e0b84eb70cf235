"""Functions of the file whose call a backward follows: helpers that run with the graph.

# NOTE [trained helpers]
``def _symeig(m): evals, evecs = torch.linalg.eigh(m); ...; return evals, evecs`` holds no
backward and no loss word, yet the script calls ``_symeig(covar)`` and then ``loss.backward()``:
whatever the helper does to a saved output is undone at that backward. :func:`backward_after_call`
gives, for a function of the file (not a method), the first backward that runs after a call of it
in the same function or the module body (a call inside ``no_grad`` does not count).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.steps import step_calls

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def backward_after_call(ctx: Context, fn: ast.AST) -> ast.Call | None:
    """A backward call after a call of ``fn`` (NOTE [trained helpers]); once per function."""
    name = getattr(fn, "name", None)
    if name is None or ctx.analysis.functions.get(name) is not fn:
        return None
    return ctx.memo("backward-after-call", fn, lambda: _find(ctx, fn))


def _find(ctx: Context, fn: ast.AST) -> ast.Call | None:
    for c, where in ctx.analysis.call_sites(fn):  # type: ignore[arg-type]
        if ctx.scope(where).grad_off_at(c) is not None:
            continue
        for b in step_calls(ctx, where).losses():
            if b.call.lineno > (c.end_lineno or c.lineno):
                return b.call
    return None
