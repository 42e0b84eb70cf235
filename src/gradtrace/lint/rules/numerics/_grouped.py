"""Per-group sums: ``zeros.index_add_(0, group, src)``, ``zeros.scatter_add_(0, idx, src)``,
and a helper of the file that returns one of them over one of its arguments."""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.returned_terms import returns
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope
from gradtrace.lint.rules.numerics._ops import strip

# method -> position of the summed source among the method's arguments (torch.<op> adds 1)
GROUPED = {"index_add": (2, "source"), "index_add_": (2, "source"),
           "scatter_add": (2, "src"), "scatter_add_": (2, "src")}
ZEROS = frozenset({"zeros", "zeros_like", "new_zeros"})


def _zeros(e: ast.AST, ctx: Context, scope: Scope | None, line: int) -> bool:
    """``torch.zeros(...)``, ``x.new_zeros(...)``, ``torch.zeros_like(x)``, or a name bound
    once before ``line`` to one of them."""
    e = strip(e)
    if isinstance(e, ast.Name) and scope is not None:
        bs = scope.bindings_before(e.id, line)
        return len(bs) == 1 and bs[0].value is not None \
            and _zeros(bs[0].value, ctx, None, line)
    if not isinstance(e, ast.Call):
        return False
    q = ctx.qualified_name(e.func) or ""
    if q.startswith("torch."):
        return q.rpartition(".")[2] in ZEROS
    return isinstance(e.func, ast.Attribute) and e.func.attr == "new_zeros"


def _arg(call: ast.Call, pos: int, key: str) -> ast.expr | None:
    if len(call.args) > pos:
        return call.args[pos]
    return next((k.value for k in call.keywords if k.arg == key), None)


def _summed(call: ast.Call, ctx: Context, scope: Scope | None) -> ast.expr | None:
    """The source a zero-filled grouped sum adds up, for ``call`` written in ``scope``."""
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr not in GROUPED:
        return None
    pos, key = GROUPED[f.attr]
    q = ctx.qualified_name(f) or ""
    if q.startswith("torch.") and call.args:
        if not _zeros(call.args[0], ctx, scope, call.lineno):
            return None
        return _arg(call, pos + 1, key)
    if not _zeros(f.value, ctx, scope, call.lineno):
        return None
    return _arg(call, pos, key)


def grouped_sum(call: ast.Call, ctx: Context) -> ast.expr | None:
    """What ``call`` sums per group (0 in a group exactly where every summed entry is 0): a
    grouped sum written here, or a call of a top-level function of the file whose every
    ``return`` is a grouped sum of the same parameter (``scatter_sum(x * x, batch, n)``)."""
    got = _summed(call, ctx, ctx.scope() if ctx.function is not None else None)
    if got is not None or not isinstance(call.func, ast.Name):
        return got
    fn = ctx.analysis.functions.get(call.func.id)
    if fn is None or fn.args.vararg is not None:
        return None
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    scope = ctx.scope(fn)
    picked: set[str] = set()
    rets = list(returns(fn.body))
    for r in rets:
        src = _summed(r.value, ctx, scope) if isinstance(r.value, ast.Call) else None
        if not isinstance(src, ast.Name) or src.id not in params \
                or scope.bindings_before(src.id, r.lineno):
            return None
        picked.add(src.id)
    if len(picked) != 1:
        return None
    name = picked.pop()
    i = params.index(name)
    if i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
        return call.args[i]
    return next((k.value for k in call.keywords if k.arg == name), None)
