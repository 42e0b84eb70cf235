"""Functions of the file that cut one of their inputs from what they return.

# NOTE [cut inputs]
``def forward(self, x): x = self.denoise(x); return self.classifier(x)`` where ``denoise``
computes everything it returns under ``torch.no_grad()`` (NOTE [grad-off returns]): what
``forward`` returns still has a graph (the classifier's weights), but none that leads back to
``x``. Grad mode is global state, so this holds for every caller: a tensor the caller trains
and hands in (an adversarial perturbation, a prompt embedding, an input being optimised)
never gets a gradient through that call, one call further than the helper itself.
:func:`cut_param` reads it from the function's top-level statements in order, tracking the
local names that still carry the parameter: a plain assignment to names carries it on when
its value reads one, and cuts it when the value is the call of a grad-off helper (or an
element or attribute of that call's result) and reads the names only in that call's
arguments. Anything else that reads a carrying name (a compound statement, an attribute
or subscript store, an expression statement, an augmented assignment, a ``return``) makes
the answer None: the parameter may reach the result, or be kept, some other way.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import Cut
from gradtrace.lint.analysis.grad_off_returns import grad_off_cut
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Def = ast.FunctionDef | ast.AsyncFunctionDef


def bound_param(fn: Def, call: ast.Call, arg: ast.AST) -> str | None:
    """The parameter of ``fn`` that ``call`` binds to its argument ``arg`` (``self`` skipped
    for a method, also when an instance is called: ``model(x)`` runs ``forward(self, x)``);
    None when ``arg`` is not one of its arguments or a ``*args`` comes first."""
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    for n, v in zip(names, call.args):
        if isinstance(v, ast.Starred):
            return None
        if v is arg:
            return n
    for k in call.keywords:
        if k.value is arg:
            return k.arg
    return None


def cut_param(ctx: Context, fn: Def, param: str) -> tuple[Cut, Def] | None:
    """(the cut, the grad-off helper making it) when ``fn`` cuts its parameter ``param`` from
    every value it returns through a grad-off helper (NOTE [cut inputs]); None otherwise."""
    return ctx.memo(f"cut-param:{param}", fn, lambda: _cut_param(ctx, fn, param))


def _cut_param(ctx: Context, fn: Def, param: str) -> tuple[Cut, Def] | None:
    a = fn.args
    if param not in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} \
            or ctx.analysis.class_of(fn) is None and fn not in ctx.tree.body:
        return None
    scope = ctx.scope(fn)
    live = {param}
    found: tuple[Cut, Def] | None = None
    for st in fn.body:
        reads = {n.id for n in walk(st) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Load)} & live
        if isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets):
            targets = {t.id for t in st.targets}  # type: ignore[attr-defined]
            if not reads:
                live -= targets
                continue
            got = _grad_off_call(ctx, scope, st.value, live)
            if got is not None:
                found = found or got
                live -= targets
            else:
                live |= targets
            continue
        if reads or isinstance(st, (ast.If, ast.For, ast.While, ast.With, ast.Try)) and any(
                isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in live
                for n in walk(st)):
            return None  # read some other way, or maybe rebound in a branch
        if isinstance(st, ast.Return) and st.value is None:
            return None
    returns = any(isinstance(st, ast.Return) for st in fn.body)
    return found if returns else None


def _grad_off_call(ctx: Context, scope, value: ast.expr,  # type: ignore[no-untyped-def]
                   live: set[str]) -> tuple[Cut, Def] | None:
    """(cut, helper) when ``value`` is the call of a grad-off helper of the file (or an
    element or attribute of its result) and reads the carrying names only in its arguments."""
    call = value
    while isinstance(call, (ast.Subscript, ast.Attribute)):
        call = call.value
    if not isinstance(call, ast.Call):
        return None
    inside = {id(n) for x in (*call.args, *(k.value for k in call.keywords)) for n in walk(x)}
    if any(isinstance(n, ast.Name) and n.id in live and id(n) not in inside
           for n in walk(value)):
        return None
    helper = called_function(call, scope, call.lineno)
    if not isinstance(helper, FUNCTION_TYPES) or ".backward(" in ctx.source(helper):
        return None
    cut = grad_off_cut(ctx, helper)
    return (cut, helper) if cut is not None else None
