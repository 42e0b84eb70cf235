"""The function of this file a call runs, with the caller's names for its parameters.

``helper(model)``, ``self.method()`` and ``obj.method()`` on an instance of a class of this file
(the receiver's kind read where the call is, or passed by every caller of the enclosing
function, two calls up): rules that follow an effect (a mode switch, a grad-mode context)
one or two calls away share this.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import MODULE, OBJECT, Kind
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
MAX_HOPS = 2


def resolve(ctx: Context, where: ast.AST, call: ast.Call) -> tuple[Fn, dict[str, str]] | None:
    """(function of this file that ``call`` runs, its parameter -> the caller's dotted
    argument): ``helper(model)``, ``self.method()``, ``obj.method()`` on an instance of a
    class of this file (``self`` then maps to ``obj``)."""
    a = ctx.analysis
    fn = a.callee(call, where)
    f = call.func
    mapping: dict[str, str] = {}
    if fn is None and isinstance(f, ast.Attribute):
        recv = dotted(f.value)
        if recv is None or recv == "self":
            return None
        k = a.kind_in(f.value, where, call.lineno) or passed_kind(ctx, where, recv)
        cls = a.classes.get(k.cls or "") if k is not None and k.what in (MODULE, OBJECT) \
            else None
        fn = cls.methods.get(f.attr) if cls is not None else None
        if fn is None:
            return None
        mapping["self"] = recv
    elif fn is not None and isinstance(f, ast.Attribute):
        mapping["self"] = "self"
    if fn is None or fn is where:
        return None
    for p, v in a.arguments(fn, call).items():
        d = dotted(v)
        if d:
            mapping[p] = d
    return fn, mapping


def passed_kind(ctx: Context, fn: ast.AST, name: str, depth: int = 0) -> Kind | None:
    """The kind every call of the function ``fn`` in this file passes for its parameter
    ``name`` (followed through the callers' own parameters, two calls up)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or "." in name \
            or depth > MAX_HOPS:
        return None
    a = ctx.analysis
    kinds = []
    for v, w in a.argument_values(fn, name):
        k = a.kind_in(v, w, 10 ** 9)
        if k is None and isinstance(v, ast.Name):
            k = passed_kind(ctx, w, v.id, depth + 1)
        kinds.append(k)
    return kinds[0] if kinds and all(x == kinds[0] for x in kinds) else None
