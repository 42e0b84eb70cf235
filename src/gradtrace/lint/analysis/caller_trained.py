"""Whether what a function returns is backpropagated by a caller of the file.

# NOTE [backpropagated through callers]
``loss = model.fit_loss(x, y)`` then ``loss.backward()``: ``fit_loss`` holds no backward, yet
every module it runs takes part in a backward pass. For a function of the file,
:func:`caller_backward` gives a backward that differentiates a value built from a call of it:
a caller (the script's body or another function) binds the call's result (``loss = ...``,
``a, b = ...``) and then backpropagates a value built from those names, or, one or two calls
further out, returns the call's value (``return self.fit_loss(x, y)``) to such a caller. The
calls are ``f(...)`` of a top-level function; ``self.m(...)`` inside its class and
``x.m(...)`` on an instance the kinds layer knows (NOTE [kinds]) of a method; the instances'
own calls (``model(x)``) of ``forward``. A call under ``no_grad`` does not count.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.instance_calls import instance_calls
from gradtrace.lint.analysis.kinds import MODULE, OBJECT
from gradtrace.lint.analysis.reach import built_from
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
MAX_HOPS = 2


def caller_backward(ctx: Context, fn: Fn, hops: int = MAX_HOPS) -> ast.Call | None:
    """A backward of a caller that differentiates what ``fn`` returns; once per function.
    NOTE [backpropagated through callers]."""
    return ctx.memo(f"caller-backward:{hops}", fn, lambda: _find(ctx, fn, hops))


def _find(ctx: Context, fn: Fn, hops: int) -> ast.Call | None:
    for call, where in sites(ctx, fn):
        scope = ctx.scope(where)
        stmt = scope.statement_of(call)
        if stmt is None or scope.grad_off_at(stmt) is not None:
            continue
        if isinstance(stmt, ast.Assign):
            names = {n.id for t in stmt.targets for n in walk(t) if isinstance(n, ast.Name)}
            for b in step_calls(ctx, where).losses():
                if b.call.lineno > (stmt.end_lineno or stmt.lineno) and b.loss is not None \
                        and names & built_from(scope, [b.loss]):
                    return b.call
        elif isinstance(stmt, ast.Return) and hops > 0 and isinstance(where, FUNCTION_TYPES):
            got = caller_backward(ctx, where, hops - 1)  # type: ignore[arg-type]
            if got is not None:
                return got
    return None


def sites(ctx: Context, fn: Fn) -> list[tuple[ast.Call, ast.AST]]:
    """(call, function or module making it) for the calls of ``fn`` the file makes."""
    cls = ctx.analysis.class_of(fn)
    if cls is None:
        return ctx.analysis.call_sites(fn)
    out: list[tuple[ast.Call, ast.AST]] = []
    if fn.name == "forward" and cls.is_module:
        out.extend(instance_calls(ctx, cls.name))
    for call, _stmt, outer in call_sites(ctx, fn.name):
        f = call.func
        if not isinstance(f, ast.Attribute):
            continue
        where = next((o for o in reversed(outer) if isinstance(o, FUNCTION_TYPES)), ctx.tree)
        if dotted(f.value) == "self":
            if ctx.analysis.class_of(where) is cls:
                out.append((call, where))
            continue
        k = ctx.analysis.kind_in(f.value, where, call.lineno)
        if k is not None and k.what in (MODULE, OBJECT) \
                and (k.cls or "").rpartition(".")[2] == cls.name:
            out.append((call, where))
    return out
