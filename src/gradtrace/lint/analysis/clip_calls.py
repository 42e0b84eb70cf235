"""Whether a call spelled like a gradient clip (``clip_grad_norm_(...)``) of a function of the
project clips anything, under the constant arguments of that call.

# NOTE [clip flags]
A project may define its own ``clip_grad_norm_`` (Latte's ``utils.clip_grad_norm_(params,
max_norm, clip_grad=False)``: a copy of PyTorch's that only measures the norm when its flag is
off). Such a call is a clip only when its body, with the call's constant arguments (and the
constant defaults of the parameters it leaves out) deciding each ``if``
(:func:`~gradtrace.lint.analysis.flag_truth.truth_under`), can still write a gradient: an
in-place tensor method (``g.mul_(c)``), a clip of PyTorch, a store into ``.grad``, or a call of
another function of the project (not followed: it may clip). The function is the file's own or
one of another file (NOTE [project index]); anything else (PyTorch's own, unknown) clips.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.flag_truth import truth_under
from gradtrace.lint.analysis.project import foreign_def

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_CLIPS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})


def clips_nothing(ctx: Context, call: ast.Call) -> bool:
    """Whether ``call`` runs a function of the project that, under the call's constant
    arguments, writes no gradient (NOTE [clip flags])."""
    f = call.func
    octx, fn = ctx, None
    if isinstance(f, ast.Name):
        fn = ctx.analysis.functions.get(f.id)
    if fn is None:
        got = foreign_def(ctx, f)
        if got is None or not isinstance(got[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        octx, fn = got
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False
    flags = _flags(fn, call)
    rebound = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)}
    flags = {k: v for k, v in flags.items() if k[1:] not in rebound}
    return not _writes(octx, fn.body, flags)


def _flags(fn: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call) -> dict[str, object]:
    """``$param`` -> the constant the call gives it (or its constant default)."""
    a = fn.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)]
    out: dict[str, object] = {}
    for name, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
        if isinstance(d, ast.Constant):
            out["$" + name] = d.value
    for x, d in zip(a.kwonlyargs, a.kw_defaults):
        if isinstance(d, ast.Constant):
            out["$" + x.arg] = d.value
    given = {**dict(zip(pos, call.args)), **{k.arg: k.value for k in call.keywords if k.arg}}
    for name, v in given.items():
        if isinstance(v, ast.Constant):
            out["$" + name] = v.value
        else:
            out.pop("$" + name, None)
    return out


def _writes(ctx: Context, body: list[ast.stmt], flags: dict[str, object]) -> bool:
    """Whether a statement of ``body`` that the flags leave reachable may write a gradient."""
    for s in body:
        if isinstance(s, ast.If):
            t = truth_under(s.test, flags)
            if _writes_in(ctx, s.test):
                return True
            if t is not False and _writes(ctx, s.body, flags):
                return True
            if t is not True and _writes(ctx, s.orelse, flags):
                return True
            continue
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        own = [v for k, v in ast.iter_fields(s) if k not in ("body", "orelse", "finalbody",
                                                             "handlers")]
        if any(_writes_in(ctx, v) for v in own if isinstance(v, ast.AST)) or any(
                _writes_in(ctx, x) for v in own if isinstance(v, list) for x in v
                if isinstance(x, ast.AST)):
            return True
        for field in ("body", "orelse", "finalbody"):
            if _writes(ctx, getattr(s, field, None) or [], flags):
                return True
        for h in getattr(s, "handlers", None) or []:
            if _writes(ctx, h.body, flags):
                return True
    return False


def _writes_in(ctx: Context, node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr == "grad" and isinstance(n.ctx, ast.Store):
            return True
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in _CLIPS or (isinstance(f, ast.Attribute) and name.endswith("_")
                              and not name.startswith("_")):
            return True
        if isinstance(f, ast.Name) and f.id in ctx.analysis.functions:
            return True
        if foreign_def(ctx, f) is not None:
            return True
    return False
