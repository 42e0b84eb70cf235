"""Helpers of the file that write one of their parameters in place.

# NOTE [parameter written in place]
``def normalize_batch(batch): batch = batch.div_(255.0); return (batch - mean) / std`` writes
the caller's tensor: an in-place method (``p.div_(...)``, ``p.clamp_(...)``, as a statement or
rebinding ``p`` to its own result), ``p += v``, ``p[m] = v`` on the parameter itself, before the
function binds the name to anything else, changes what the caller passed. A caller that passes
the output of an op that saved it for backward (a Tanh, a Sigmoid, a ReLU...) makes backward
raise "modified by an inplace operation" (fast-neural-style#12). Writes through ``p.data``
bump no version counter and are not counted; neither is a write after ``p`` is rebound
(``p = p / 255`` is a new tensor). A name bound to the parameter itself (``y = x``, then
``y.add_(...)``) writes it too. :func:`param_writes` reads each file function once.
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


def forward_writes(ctx: Context) -> dict[str, list[ParamWrite]]:
    """Module class of the file -> the inputs its ``forward`` writes in place (``index``
    counts from the first input after ``self``, as a call of an instance passes them:
    ``y = x; y.add_(...)`` in RESA's ``forward`` writes what ``self.reducer(feats)`` passes);
    once per file."""
    def make() -> dict[str, list[ParamWrite]]:
        out: dict[str, list[ParamWrite]] = {}
        for name, info in ctx.analysis.classes.items():
            fn = info.methods.get("forward") if info.is_module else None
            if fn is None:
                continue
            a = fn.args
            params = [p.arg for p in (*a.posonlyargs, *a.args)][1:]
            got = _first_writes(fn, params) if params else []
            if got:
                out[name] = got
        return out
    return ctx.memo("forward-writes", ctx.tree, make)


def _first_writes(fn: ast.FunctionDef | ast.AsyncFunctionDef,
                  params: list[str]) -> list[ParamWrite]:
    """For each parameter, the first in-place write into it in ``fn``'s own body, in source
    order, before a statement binds it to something else (one pass over the body)."""
    open_ = set(params)
    held = {p: p for p in params}  # name -> the parameter whose tensor it holds (`y = x`)
    found: dict[str, ParamWrite] = {}
    for s in _own(fn.body):
        name = _written(s)
        p = held.get(name)  # type: ignore[arg-type]
        if p in open_:
            w = _write(s, name)  # type: ignore[arg-type]
            if w is not None:
                found[p] = ParamWrite(fn, params.index(p), s, *w)  # type: ignore
                open_.discard(p)  # type: ignore[arg-type]
        same = held.get(s.value.id) if isinstance(s, ast.Assign) and len(s.targets) == 1 \
            and isinstance(s.value, ast.Name) else None
        for b in _bound(s):
            held.pop(b, None)
            if b in open_ and not any(v == b for v in held.values()):
                open_.discard(b)
        if same is not None and isinstance(s.targets[0], ast.Name):  # type: ignore[attr-defined]
            held[s.targets[0].id] = same  # type: ignore[attr-defined]
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
