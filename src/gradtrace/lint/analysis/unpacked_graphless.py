"""A name unpacked from a position of a call's result that its callee fills without a graph.

# NOTE [graphless tuple element]
``batch_loss, _ = model(imgs, targets, optimizer=opt)`` where the model's ``forward``
backpropagates inside and ends ``return (total_loss, detections)`` with ``total_loss = 0.``
and ``total_loss += loss.item()``: ``batch_loss`` is a Python number, and summing it keeps
no graph. The callee is a function of the file, or the ``forward`` of the module class the
called name is built from (``model = Net(...)``, ``model: Net = Net(...).to(device)``, in
this file or, through the project index, NOTE [project index], in another file of the
project); every ``return`` of it must be a tuple whose element at the unpacked position is
graphless (:func:`.graphless_returns.returned_element_graphless`), or, for a function of the
file, one parameter handed back whole or sliced (``return pred[..., :n], wav``) that the call
fills with data by its caller's tracer (``pred, wav = match_dim(pred, wav)``, ``wav`` of the
batch: GT509 no longer takes ``wav`` for a graph the discriminator's backward freed).
Anything else: unknown.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.foreign_kinds import DEFINITIONS
from gradtrace.lint.analysis.graphless_returns import returned_element_graphless
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Binding, Scope

_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train", "eval"})


def _position(s: ast.stmt, name: str) -> int | None:
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1
            and isinstance(s.targets[0], (ast.Tuple, ast.List))):
        return None
    elts = s.targets[0].elts
    if any(isinstance(e, ast.Starred) for e in elts):
        return None
    return next((i for i, e in enumerate(elts) if dotted(e) == name), None)


def _forward_of(ctx: Context, scope: Scope, func: ast.expr, line: int
                ) -> tuple[Context, ast.AST] | None:
    """(context, ``forward``) of the module class the called name is built from."""
    if not isinstance(func, ast.Name):
        return None
    b = scope.binding_before(func.id, line)
    v = b.value if b is not None else None
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr in _MOVES:
        v = v.func.value
    if not isinstance(v, ast.Call):
        return None
    info = ctx.analysis.classes.get(dotted(v.func) or "")
    if info is not None:
        fwd = info.methods.get("forward")
        return (ctx, fwd) if fwd is not None else None
    got = DEFINITIONS[0](ctx, v.func) if DEFINITIONS else None
    if got is None or not isinstance(got[1], ast.ClassDef):
        return None
    fwd = next((s for s in got[1].body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                and s.name == "forward"), None)
    return (got[0], fwd) if fwd is not None else None


def unpacked_graphless(ctx: Context, scope: Scope, b: Binding) -> bool:
    """``b`` binds a name unpacked from a call whose callee gives a graphless value at that
    position (NOTE [graphless tuple element])."""
    i = _position(b.stmt, b.name)
    call = getattr(b.stmt, "value", None)
    if i is None or not isinstance(call, ast.Call):
        return False
    fn = ctx.analysis.callee(call, scope.node)
    if fn is not None:
        return returned_element_graphless(ctx, fn, i) or _passed_data(ctx, scope, b, call, fn, i)
    got = _forward_of(ctx, scope, call.func, b.line)
    return got is not None and returned_element_graphless(got[0], got[1], i)


def _passed_data(ctx: Context, scope: Scope, b: Binding, call: ast.Call, fn: ast.AST,
                 i: int) -> bool:
    """Every ``return`` of the file's function ``fn`` gives back at position ``i`` one
    parameter, whole or sliced (``return pred[..., a:b], wav``), never rebound in ``fn``,
    and the call hands that parameter a value its caller's tracer reads as data
    (``pred, wav = match_dim(pred, wav)`` with ``wav`` of the batch): the element is that
    data (NOTE [graphless tuple element])."""
    from gradtrace.lint.analysis.origins import origins
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.args.vararg \
            or fn.args.kwonlyargs or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    rets = [r for r in ast.walk(fn) if isinstance(r, ast.Return)]
    names = set()
    for r in rets:
        if not (isinstance(r.value, ast.Tuple) and len(r.value.elts) > i):
            return False
        e = r.value.elts[i]
        while isinstance(e, ast.Subscript):
            e = e.value
        if not isinstance(e, ast.Name):
            return False
        names.add(e.id)
    params = [a.arg for a in fn.args.args]
    if len(names) != 1 or (p := names.pop()) not in params \
            or ctx.scope(fn).bindings.get(p):
        return False
    k = params.index(p) - (1 if params and params[0] in ("self", "cls") and isinstance(
        call.func, ast.Attribute) else 0)
    arg = call.args[k] if 0 <= k < len(call.args) else next(
        (kw.value for kw in call.keywords if kw.arg == p), None)
    return arg is not None and not origins(ctx, scope.node).trace(arg, b.stmt, b.line).live
