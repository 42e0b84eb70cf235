"""What a method of the file hands back when it only builds NumPy arrays or Python numbers.

# NOTE [returned arrays]
A helper that reads a model's weights for a histogram (``w.data.cpu().numpy().flatten()``,
then ``np.concatenate``) and returns them in a dict literal (``{"mu_weight": mu_weight,
...}``) hands back arrays: an entry of that dict, unpacked from the caller's ``scores, params
= self.set_forward(x)`` where ``set_forward`` returns ``..., params`` bound to that helper's
call, holds no graph (few-shot-hypernets' Bayesian parameter statistics, collected over a
test loop). :func:`unpacked_arrays` answers for a value read as ``name`` or ``name[key]``: the
name is unpacked from a call of a function or method of the file, and every ``return`` of it
gives, at that position, a value made only of NumPy results (a ``numpy.*`` call, ``.numpy()``,
``.item()``, ``.tolist()``, a number), through plain names and dict, list and tuple
literals, or the call of another such function of the file (two calls deep).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef
TO_HOST = frozenset({"numpy", "item", "tolist"})


def unpacked_arrays(ctx: Context, scope: Scope, value: ast.expr, line: int) -> bool:
    """``value`` (``d`` or ``d["key"]``) holds what a function of the file returns at the
    position ``d`` takes in a tuple unpacking of its call: arrays only
    (NOTE [returned arrays])."""
    while isinstance(value, ast.Subscript):
        value = value.value
    if not isinstance(value, ast.Name):
        return False
    b = scope.binding_before(value.id, line)
    stmt = getattr(b, "stmt", None)
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 \
            or not isinstance(stmt.value, ast.Call):
        return False
    t = stmt.targets[0]
    idx = None if isinstance(t, ast.Name) else next(
        (i for i, e in enumerate(t.elts) if isinstance(e, ast.Name) and e.id == value.id),
        None) if isinstance(t, ast.Tuple) else None
    if isinstance(t, ast.Tuple) and idx is None:
        return False
    fn = ctx.analysis.callee(stmt.value, scope.node)
    return fn is not None and _returns_arrays(ctx, fn, idx, 0)


def _returns_arrays(ctx: Context, fn: Fn, idx: int | None, depth: int) -> bool:
    rets = [r for r in walk(fn) if isinstance(r, ast.Return)]
    if not rets or depth > 2:
        return False
    scope = ctx.scope(fn)
    for r in rets:
        v = r.value
        if idx is not None:
            if not isinstance(v, ast.Tuple) or idx >= len(v.elts) \
                    or any(isinstance(e, ast.Starred) for e in v.elts):
                return False
            v = v.elts[idx]
        if v is None or not _arrays(ctx, fn, scope, v, r.lineno, depth, 0):
            return False
    return True


def _arrays(ctx: Context, fn: Fn, scope: Scope, e: ast.expr, line: int, depth: int,
            hops: int) -> bool:
    if hops > 4:
        return False
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.Dict):
        return all(_arrays(ctx, fn, scope, v, line, depth, hops + 1) for v in e.values)
    if isinstance(e, (ast.List, ast.Tuple)):
        return all(_arrays(ctx, fn, scope, v, line, depth, hops + 1) for v in e.elts)
    if isinstance(e, ast.Name):
        bs = [b for b in scope.bindings.get(e.id, ()) if b.line < line]
        return bool(bs) and all(b.value is not None and isinstance(b.stmt, ast.Assign)
                                and _arrays(ctx, fn, scope, b.value, b.line, depth, hops + 1)
                                for b in bs)
    if isinstance(e, ast.Call):
        if (ctx.qualified_name(e.func) or "").startswith("numpy."):
            return True
        if isinstance(e.func, ast.Attribute) and e.func.attr in TO_HOST:
            return True
        callee = ctx.analysis.callee(e, fn)
        return callee is not None and callee is not fn \
            and _returns_arrays(ctx, callee, None, depth + 1)
    return False
