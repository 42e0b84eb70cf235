"""Helpers of the file that write one of their parameters in place.

# NOTE [parameter written in place]
``def normalize_batch(batch): batch = batch.div_(255.0); return (batch - mean) / std`` writes
the caller's tensor: an in-place method (``p.div_(...)``, ``p.clamp_(...)``, as a statement or
rebinding ``p`` to its own result), ``p += v``, ``p[m] = v`` on the parameter itself, before the
function binds the name to anything else, changes what the caller passed. A caller that passes
the output of an op that saved it for backward (a Tanh, a Sigmoid, a ReLU...) makes backward
raise "modified by an inplace operation" (fast-neural-style#12). Writes through ``p.data``
bump no version counter and are not counted; neither is a write after ``p`` is rebound
(``p = p / 255`` is a new tensor). :func:`param_writes` reads each file function once.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# in-place methods that leave the values alone (they bump no version counter, or not the data)
NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream"})
ARITH = frozenset({"add_", "sub_", "mul_", "div_"})


@dataclass(frozen=True)
class ParamWrite:
    """The statement ``stmt`` of ``fn`` writes its ``index``-th parameter (``kind``:
    "arith", "method", "aug" or "index", as :mod:`gradtrace.lint.rules.inplace` names them;
    ``target`` the node written)."""

    fn: ast.FunctionDef | ast.AsyncFunctionDef
    index: int
    stmt: ast.stmt
    kind: str
    target: ast.AST


def param_writes(ctx: Context) -> dict[str, list[ParamWrite]]:
    """Function name -> the parameters it writes in place (NOTE [parameter written in place]),
    for the functions of the file (not methods); once per file."""
    return ctx.memo("param-writes", ctx.tree, lambda: _all(ctx))


def _all(ctx: Context) -> dict[str, list[ParamWrite]]:
    out: dict[str, list[ParamWrite]] = {}
    for name, fn in ctx.analysis.functions.items():
        a = fn.args
        params = [p.arg for p in (*a.posonlyargs, *a.args)]
        got = _first_writes(fn, params) if params else []
        if got:
            out[name] = got
    return out


def _first_writes(fn: ast.FunctionDef | ast.AsyncFunctionDef,
                  params: list[str]) -> list[ParamWrite]:
    """For each parameter, the first in-place write into it in ``fn``'s own body, in source
    order, before a statement binds it to something else (one pass over the body)."""
    open_ = set(params)
    found: dict[str, ParamWrite] = {}
    for s in _own(fn.body):
        name = _written(s)
        if name in open_:
            w = _write(s, name)  # type: ignore[arg-type]
            if w is not None:
                found[name] = ParamWrite(fn, params.index(name), s, *w)  # type: ignore
                open_.discard(name)  # type: ignore[arg-type]
        for b in _bound(s):
            open_.discard(b)
        if not open_:
            break
    return [found[p] for p in params if p in found]


def _written(s: ast.stmt) -> str | None:
    """The name a statement may write in place, from its shape (cheap)."""
    if isinstance(s, ast.AugAssign):
        t = s.target
        t = t.value if isinstance(t, ast.Subscript) else t
        return t.id if isinstance(t, ast.Name) else None
    if isinstance(s, ast.Assign) and len(s.targets) == 1 \
            and isinstance(s.targets[0], ast.Subscript):
        t = s.targets[0].value
        return t.id if isinstance(t, ast.Name) else None
    v = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and isinstance(v.func.value, ast.Name) and v.func.attr.endswith("_"):
        return v.func.value.id
    return None


def _write(s: ast.stmt, p: str) -> tuple[str, ast.AST] | None:
    if isinstance(s, ast.AugAssign):
        t = s.target
        if isinstance(t, ast.Subscript):
            return ("index", t) if dotted(t.value) == p else None
        return ("aug", t) if isinstance(t, ast.Name) and t.id == p else None
    if isinstance(s, ast.Assign) and len(s.targets) == 1:
        t = s.targets[0]
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == p:
            return "index", t
        if not (isinstance(t, ast.Name) and t.id == p):
            return None  # `q = p.div_(2)` writes p too, but then p is read through q
    elif not isinstance(s, ast.Expr):
        return None
    v = s.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and isinstance(v.func.value, ast.Name) and v.func.value.id == p:
        m = v.func.attr
        if m.endswith("_") and not m.startswith("_") and m not in NOT_WRITES:
            return ("arith" if m in ARITH else "method"), v
    return None


def _bound(s: ast.stmt) -> Iterator[str]:
    """The names ``s`` binds (an assignment, a loop or ``with`` target, a nested def)."""
    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield s.name
        return
    targets: list[ast.AST] = []
    if isinstance(s, ast.Assign):
        targets = list(s.targets)
    elif isinstance(s, (ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [s.target]
    elif isinstance(s, (ast.With, ast.AsyncWith)):
        targets = [i.optional_vars for i in s.items if i.optional_vars is not None]
    for t in targets:
        if isinstance(t, ast.Name):
            yield t.id
        elif isinstance(t, (ast.Tuple, ast.List)):
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    yield n.id


def _own(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a body in source order, nested blocks included, nested defs not."""
    for s in body:
        yield s
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for f in ("body", "orelse", "finalbody"):
            yield from _own(getattr(s, f, None) or [])
        for h in getattr(s, "handlers", ()):
            yield from _own(h.body)
