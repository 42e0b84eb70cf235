"""Calls that give a tensor argument back as the very same object.

# NOTE [argument given back]
``torch.as_tensor(t)``, ``torch.asarray(t)``, ``t.to(None)`` and ``t.to(dtype)`` with the
dtype it already has return ``t`` itself, not a copy (checked on torch 2.13: ``as_tensor(p)
is p`` for a Parameter). A backend helper of the file built from them
(``def convert_to_tensor(x, dtype=None): if isinstance(x, torch.Tensor): return x if dtype
is None else x.to(dtype); return torch.as_tensor(x, dtype=dtype)``) gives a tensor back
unchanged when the caller leaves ``dtype`` at its default: ``inputs =
convert_to_tensor(inputs)`` still names the caller's tensor, and a write into it writes into
the caller's Parameter (keras-core's ``slice_update``, PR 405). :func:`gives_back` says so
for one call; every ``return`` of the helper must give back the argument (its name, or one
of the calls above over it whose other arguments are the helper's own parameters defaulting
to ``None`` that the call does not pass), and the helper is a function of the file.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import scope_statements

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
# torch functions that return a tensor argument itself when nothing needs converting
AS_IS = frozenset({"torch.as_tensor", "torch.asarray"})


def gives_back(ctx: Context, call: ast.expr, name: str) -> bool:
    """``call`` returns the tensor named ``name`` itself (NOTE [argument given back])."""
    if not isinstance(call, ast.Call) or not call.args or not (
            isinstance(call.args[0], ast.Name) and call.args[0].id == name):
        return False
    if len(call.args) == 1 and not call.keywords and \
            (ctx.qualified_name(call.func) or "") in AS_IS:
        return True
    if not isinstance(call.func, ast.Name):
        return False
    fn = ctx.analysis.functions.get(call.func.id)
    if fn is None or len(call.args) != 1 or call.keywords:
        return False
    return ctx.memo("gives-back", fn, lambda: _gives_back(ctx, fn))


def _gives_back(ctx: Context, fn: Fn) -> bool:
    a = fn.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)]
    if not pos:
        return False
    first = pos[0]
    defaults = dict(zip(pos[len(pos) - len(a.defaults):], a.defaults))
    defaults.update({k.arg: d for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    unset = {k for k, d in defaults.items() if isinstance(d, ast.Constant) and d.value is None}
    rets = [s for s in ctx.memo("scope-statements", fn, lambda: scope_statements(fn))
            if isinstance(s, ast.Return)]
    if not rets or any(r.value is None for r in rets):
        return False
    if any(isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
            isinstance(t, ast.Name) and t.id == first
            for tg in (n.targets if isinstance(n, ast.Assign) else [n.target])
            for t in ast.walk(tg)) for n in ast.walk(fn)):
        return False  # the argument is rebound inside
    return all(_same(ctx, r.value, first, unset) for r in rets)  # type: ignore[arg-type]


def _same(ctx: Context, e: ast.expr, name: str, unset: set[str]) -> bool:
    if isinstance(e, ast.Name):
        return e.id == name
    if isinstance(e, ast.IfExp):
        return _same(ctx, e.body, name, unset) and _same(ctx, e.orelse, name, unset)
    if not isinstance(e, ast.Call):
        return False
    extra = [*e.args, *(k.value for k in e.keywords)]
    f = e.func
    if isinstance(f, ast.Attribute) and f.attr == "to" and isinstance(f.value, ast.Name) \
            and f.value.id == name:
        pass
    elif (ctx.qualified_name(f) or "") in AS_IS and e.args and isinstance(e.args[0], ast.Name) \
            and e.args[0].id == name:
        extra = extra[1:]
    else:
        return False
    return all(isinstance(x, ast.Name) and x.id in unset or
               isinstance(x, ast.Constant) and x.value is None for x in extra)
