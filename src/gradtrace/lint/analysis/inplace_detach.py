"""Values detached in place after they were bound: ``t.detach_()`` as a statement, or a call of a
function of the file that detaches its parameter in place (NOTE [detached in place]).

# NOTE [detached in place]
``Tensor.detach_()`` removes the tensor's ``grad_fn`` and sets ``requires_grad=False`` on the
object itself (torch 2.13): every later read of the name sees a value without history, though
no assignment rebinds it. A metrics tracker whose ``update(logits, y)`` begins with
``logits.detach_()`` cuts its caller's ``logits`` the same way, so a loss built from them
after the call raises "element 0 of tensors does not require grad". Only statements of the
function itself count (``t.detach_()``, or ``f(t, ...)`` / ``obj.update(t, ...)`` running a
function of the file whose body detaches that parameter at its top level, not in a branch),
after the name's binding and in a block enclosing the read.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import resolve
from gradtrace.lint.analysis.paths import statement_paths
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Site = tuple[ast.stmt, ast.Call]  # the statement of the scope, the `detach_()` call


def _detach_of(s: ast.stmt) -> tuple[str, ast.Call] | None:
    """(name, call) for a statement ``name.detach_()``."""
    v = s.value if isinstance(s, ast.Expr) else None
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr == "detach_" and not v.args and not v.keywords:
        name = dotted(v.func.value)
        if name:
            return name, v
    return None


def _own_detaches(fn: ast.AST) -> dict[str, ast.Call]:
    """The parameters ``fn`` detaches in place at the top level of its body."""
    out: dict[str, ast.Call] = {}
    rebound: set[str] = set()  # `t = t.clone()` first: the caller's tensor is not touched
    for s in getattr(fn, "body", ()):
        got = _detach_of(s)
        if got is not None and got[0] not in rebound:
            out.setdefault(got[0], got[1])
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                rebound.add(n.id)
    return out


def _index(ctx: Context, scope: Scope) -> dict[str, list[Site]]:
    out: dict[str, list[Site]] = {}
    for s in scope.stmts:
        got = _detach_of(s)
        if got is not None:
            out.setdefault(got[0], []).append((s, got[1]))
            continue
        v = s.value if isinstance(s, ast.Expr) else None
        if not isinstance(v, ast.Call):
            continue
        called = resolve(ctx, scope.node, v)
        if called is None:
            continue
        fn, mapping = called
        own = ctx.memo("detached-params", fn, lambda fn=fn: _own_detaches(fn))
        for p, call in own.items():
            arg = mapping.get(p)
            if arg and p != "self":
                out.setdefault(arg, []).append((s, call))
    return out


def detached_in_place(ctx: Context, scope: Scope, name: str, after: int,
                      use: ast.stmt | None, line: int) -> Site | None:
    """(the statement, the ``detach_()`` call) that cut ``name`` (bound on ``after``) before ``line``, in a
    statement of ``scope`` enclosing ``use`` (NOTE [detached in place])."""
    if not ctx.mentions("detach_"):
        return None
    index = ctx.memo("detached-in-place", scope.node, lambda: _index(ctx, scope))
    paths = None
    for s, call in index.get(name, ()):
        if after < s.lineno < line:
            paths = paths or statement_paths(ctx, scope.node)
            if paths.dominates(s, use):
                return s, call
    return None
