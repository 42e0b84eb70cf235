"""Functions of the file whose call a backward follows: helpers that run with the graph.

# NOTE [trained helpers]
``def _symeig(m): evals, evecs = torch.linalg.eigh(m); ...; return evals, evecs`` holds no
backward and no loss word, yet the script calls ``_symeig(covar)`` and then ``loss.backward()``:
whatever the helper does to a saved output is undone at that backward. :func:`backward_after_call`
gives, for a function of the file (not a method), the first backward that runs after a call of it
in the same function or the module body (a call inside ``no_grad`` does not count).
:func:`backward_after_method` does the same for a method of a plain class of the file that its
``__call__`` (its own or a base's of the file) runs: ``transform(w)`` runs ``Transform.__call__``,
which returns ``self._call(x)`` (a torch.distributions-style transform), then ``loss.backward()``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import object_sites
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

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


def backward_after_method(ctx: Context, fn: ast.AST) -> ast.Call | None:
    """A backward call after a call of an instance of the plain class of the file that
    defines ``fn``, when the instance's ``__call__`` is ``fn`` or calls ``self.<fn>(...)``."""
    cls = ctx.analysis.class_of(fn)
    if cls is None or cls.is_module or cls.methods.get(getattr(fn, "name", "")) is not fn:
        return None
    return ctx.memo("backward-after-method", fn, lambda: _after_method(ctx, cls, fn))


def _after_method(ctx: Context, cls: object, fn: ast.AST) -> ast.Call | None:
    entry = _own_call(ctx, cls)
    name = getattr(fn, "name", "")
    if entry is None or entry is not fn and not any(
            isinstance(n, ast.Call) and dotted(n.func) == "self." + name for n in walk(entry)):
        return None
    for c, where in object_sites(ctx.analysis, cls.name):  # type: ignore[attr-defined]
        if ctx.scope(where).grad_off_at(c) is not None:
            continue
        for b in step_calls(ctx, where).losses():
            if b.call.lineno > (c.end_lineno or c.lineno):
                return b.call
    return None


def _own_call(ctx: Context, cls: object, depth: int = 0) -> ast.AST | None:
    """The ``__call__`` a plain class of the file runs: its own or a base's of the file."""
    own = cls.methods.get("__call__")  # type: ignore[attr-defined]
    if own is not None or depth > 4:
        return own
    for b in cls.node.bases:  # type: ignore[attr-defined]
        base = ctx.analysis.classes.get(dotted(b) or "")
        if base is not None and not base.is_module:
            got = _own_call(ctx, base, depth + 1)
            if got is not None:
                return got
    return None
