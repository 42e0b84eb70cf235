"""GT103's fact about a NumPy helper of the file: what its callers hand it.

# NOTE [NumPy helper fed arrays]
`def cross_entropy_loss(p, q): return -np.sum(p * np.log(q))` in a notebook that compares a
NumPy cross-entropy with torch's: the NumPy call reads only the function's own arguments, and
every call of the function in its file hands it NumPy arrays (`p = softmax(np.random.rand(n))`,
a NumPy softmax of the file), no other file of the project calling it (when the project can be
searched). No tensor reaches NumPy, so nothing raises and no graph is cut: the helper is
NumPy code, not a loss on the way to a backward. A call that hands it a tensor or a value of
unknown kind, a call from another file, or no call at all, keeps the finding.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.calls import named_calls
from gradtrace.lint.analysis.callers import foreign_sites
from gradtrace.lint.context import Context
from gradtrace.lint.analysis.cuts import top_defs
from gradtrace.lint.nodes import walk
from gradtrace.lint.grad_modes import FUNCTION_TYPES


def fed_numpy_by_callers(operand: ast.expr, fn: ast.AST, ctx: Context) -> bool:
    """``operand`` (what NumPy is given in the top-level function ``fn``) reads only ``fn``'s
    parameters, never rebound, and every call of ``fn`` passes NumPy arrays for them
    (NOTE [NumPy helper fed arrays])."""
    if not isinstance(fn, FUNCTION_TYPES) or fn not in ctx.tree.body:
        return False
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    scope = ctx.scope(fn)
    read = {n.id for n in ast.walk(operand) if isinstance(n, ast.Name)} - set(
        ctx.imports.aliases)
    if not read or not read <= set(params) or any(scope.bindings.get(p) for p in read):
        return False
    sites = named_calls(ctx, fn.name)
    if not sites:
        return False
    for call, where in sites:
        given = {p: a for p, a in zip(params, call.args)}
        given.update((k.arg, k.value) for k in call.keywords if k.arg is not None)
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return False
        for p in read:
            a = given.get(p)
            if a is None or not numpy_made(a, where, call.lineno, ctx):
                return False
    return not foreign_sites(ctx, fn)  # a call from another file: of unknown kind


def numpy_made(e: ast.expr, where: ast.AST, line: int, ctx: Context, depth: int = 0) -> bool:
    """``e``, read at ``line`` in ``where``, is a NumPy array (or a number) by its making: a
    call of a ``numpy`` function (by the qualified name of its import), a method of such a
    value (``a.sum(axis=0)``, ``np.copy(p)``), arithmetic of those and constants, a name
    last bound to one, or a call of a function of the file every ``return`` of which gives
    one (a NumPy softmax)."""
    if depth > 8:
        return False
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, ast.UnaryOp):
        return numpy_made(e.operand, where, line, ctx, depth + 1)
    if isinstance(e, ast.BinOp):
        return all(numpy_made(x, where, line, ctx, depth + 1) for x in (e.left, e.right))
    if isinstance(e, ast.Name):
        b = ctx.scope(where).binding_before(e.id, line)
        v = b.value if b is not None and isinstance(b.stmt, ast.Assign) else None
        return v is not None and numpy_made(v, where, b.line, ctx, depth + 1)
    if not isinstance(e, ast.Call):
        return False
    if (ctx.qualified_name(e.func) or "").startswith("numpy."):
        return True
    if isinstance(e.func, ast.Attribute):
        return numpy_made(e.func.value, where, line, ctx, depth + 1)
    fn = top_defs(ctx).get(e.func.id) if isinstance(e.func, ast.Name) else None
    rets = [s.value for s in walk(fn) if isinstance(s, ast.Return)] if fn is not None else []
    return bool(rets) and all(r is not None and numpy_made(r, fn, r.lineno, ctx, depth + 1)
                              for r in rets)
