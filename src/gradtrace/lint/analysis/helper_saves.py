"""Which parameters of a helper of the file the helper saves for backward (GT204 through a
call: ``logps(model, ids)`` with ``ids`` made under ``inference_mode`` runs ``model(ids[:, :-1])``
and ``gather(2, ids[:, 1:])``, and both save it)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import peel, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# operations that save an argument (or the index) for backward
SAVING = frozenset({"matmul", "mm", "bmm", "einsum", "mul", "linear", "conv1d", "conv2d",
                    "conv3d", "baddbmm", "addmm", "gather", "embedding", "index_select",
                    "take_along_dim"})
VIEWS = frozenset({"view", "reshape", "expand", "unsqueeze", "squeeze", "flatten",
                   "contiguous", "to", "long"})


def saved_params(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """Parameters of ``fn`` that reach, unchanged or as a view, a call of another parameter
    (the model it is given), of a ``self`` layer, or of an op that saves its inputs."""
    return ctx.memo("gt2-helper-saved-params", fn, lambda: _saved(ctx, fn))


def _saved(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    a = fn.args
    params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
    out: set[str] = set()
    for n in walk(fn):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = dotted(f) or ""
        last = (ctx.qualified_name(f) or name).rpartition(".")[2]
        runs_model = isinstance(f, ast.Name) and f.id in params or \
            name.startswith("self.") and name.count(".") == 1
        if not (runs_model or last in SAVING):
            continue
        for arg in (*n.args, *(k.value for k in n.keywords)):
            p = _root(arg)
            if p in params and p != name:
                out.add(p)
        if last in SAVING and isinstance(f, ast.Attribute):
            p = _root(f.value)  # `ids.gather(...)`: the receiver is saved too
            if p in params:
                out.add(p)
    return frozenset(out)


def _root(e: ast.AST) -> str | None:
    """``ids`` for ``ids``, ``ids[:, 1:]``, ``ids[:, 1:].unsqueeze(-1)``."""
    e = peel(e, VIEWS, 8)
    return e.id if isinstance(e, ast.Name) else None
