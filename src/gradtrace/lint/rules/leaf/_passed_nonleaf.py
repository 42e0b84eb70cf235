"""A non-leaf tensor reaching a function of the file as an argument (GT303 across a call).

``def prepare(x): x.requires_grad = True`` is fine for a leaf and raises for a computed
tensor: what ``x`` holds is what the calls of ``prepare`` pass (NOTE [parameter kinds]).
When every call of the function in the file passes, with grad enabled, a value that is a
non-leaf at the caller (computed from a leaf that requires grad, a model's output: the
same reasons GT303 reads in one function), or passes on a parameter of its own that every
call of that function passes so (a few calls up), the flag raises. One call passing a leaf
(a fresh tensor, ``y.detach()``, an unknown value) leaves the parameter unknown.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.grad_values import is_parameter
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import (
    derived_from_grad_leaf, made_non_leaf, non_leaf_origin,
)

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef
MAX_HOPS = 3
STATE_ATTRS = frozenset({"requires_grad", "is_leaf", "grad_fn"})


def flagged_non_leaf(fn: ast.AST | None, name: str, stmt: ast.stmt, ctx: Context
                     ) -> tuple[ast.stmt, ast.AST] | None:
    """:func:`passed_non_leaf` for the flag statement ``stmt`` on parameter ``name`` of
    ``fn``, unless ``stmt`` runs under a test of that tensor's state (``if not
    x.requires_grad:``, ``if x.is_leaf:``): a helper that guards the flag so is silent."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or any(
            isinstance(n, (ast.If, ast.IfExp, ast.While)) and stmt in list(walk(n))
            and _tests_state(n.test, name) for n in walk(fn)):
        return None
    return passed_non_leaf(fn, name, ctx)


def _tests_state(test: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in STATE_ATTRS
               and isinstance(n.value, ast.Name) and n.value.id == name for n in walk(test))


def passed_non_leaf(fn: ast.AST | None, name: str, ctx: Context, hops: int = MAX_HOPS
                    ) -> tuple[ast.stmt, ast.AST] | None:
    """(a call statement passing a non-leaf for parameter ``name`` of ``fn``, the function
    or module holding it) when every call of ``fn`` in the file passes one with grad
    enabled; None otherwise (module docstring)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or hops <= 0 \
            or fn.name == "__init__" or not is_parameter(fn, name):
        return None
    a = ctx.analysis
    sites = function_sites(a, fn)
    if not sites:
        return None
    first: tuple[ast.stmt, ast.AST] | None = None
    for call, where in sites:
        if any(isinstance(x, ast.Starred) for x in call.args) \
                or any(k.arg is None for k in call.keywords):
            return None
        v = a.arguments(fn, call).get(name)
        sc = ctx.scope(where)
        st = sc.statement_of(call)
        if v is None or st is None or sc.grad_off_at(st) is not None \
                or not _non_leaf_at(v, where, call.lineno, ctx, hops):
            return None
        first = first or (st, where)
    return first


def _non_leaf_at(v: ast.expr, where: ast.AST, line: int, ctx: Context, hops: int) -> bool:
    """``v``, passed at ``line`` of ``where``, is surely a non-leaf tensor there."""
    sc = ctx.scope(where)
    if isinstance(v, ast.Name):
        if sc.binding_before(v.id, line) is None:  # a parameter of the caller, passed on
            return passed_non_leaf(where, v.id, ctx, hops - 1) is not None
        got = non_leaf_origin(sc, v.id, line)
        return got is not None and not (got[1] == "a model output" and freezes_flag(sc, got[0]))
    return made_non_leaf(v, ctx) is not None or derived_from_grad_leaf(sc, v, line) is not None


def freezes_flag(scope: Scope, out: Binding) -> bool:
    """Whether the scope may freeze the model whose output ``out`` is (then it may be a leaf):
    a loop over its parameters or ``requires_grad_()`` on it or a part of it."""
    model = out.value.func.id if isinstance(out.value, ast.Call) \
        and isinstance(out.value.func, ast.Name) else None
    if model is None:
        return True
    for m in scope.method_calls:
        if m.method == "requires_grad_" and (m.receiver == model
                                             or m.receiver.startswith(model + ".")):
            return True
    for s in scope.stmts:
        if isinstance(s, (ast.For, ast.AsyncFor)) and isinstance(s.iter, ast.Call) \
                and isinstance(s.iter.func, ast.Attribute) \
                and (dotted(s.iter.func.value) or "").partition(".")[0] == model \
                and any(isinstance(n, ast.Attribute) and n.attr == "requires_grad"
                        for n in walk(s)):
            return True
    return False
