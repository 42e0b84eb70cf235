"""Names that carry no graph by what they are bound to, read for the tracer (:mod:`.origins`).

Three questions the tracer asks of a name before following it, answered from its bindings
alone (no tracing): ``self.lam`` a hyper-parameter or a buffer (:func:`setting_attr`),
``criterion`` a torch loss object or function holding no weights (:func:`pure_loss`), ``n``
a ``nonlocal`` call counter (:func:`nonlocal_numbers`). Each answer is kept on the asking
tracer (``Tracer._pure``): the class read is the context's at the first ask.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.cuts import (
    MOVES, constant_default_args, is_torch_loss, registered_buffer, self_assignments)
from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.vocabulary import LOSS_CALLABLE_RE
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer


def nonlocal_numbers(t: Tracer) -> frozenset[str]:
    """``nonlocal n`` names the enclosing function binds only to Python numbers (``n = 0``,
    ``n += 1``): a call counter of a stub loss in a test, never a tensor on the graph."""
    hit = t._nonlocals
    if hit is None:
        hit = t._nonlocals = frozenset(_nonlocal_numbers(t))
    return hit


def _nonlocal_numbers(t: Tracer) -> Iterator[str]:
    node = t.scope.node
    names = {n for s in getattr(node, "body", ()) for x in walk(s)
             if isinstance(x, ast.Nonlocal) for n in x.names}
    if not names:
        return
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    outer = next((s for s in reversed(t.ctx.stmts) if isinstance(s, defs)
                  and any(b is node for b in s.body)), None)
    if outer is None:
        outer = next((f for f in walk(t.ctx.tree) if isinstance(f, defs)
                      and any(b is node for b in f.body)), None)
    if outer is None:
        return
    bindings = t.ctx.scope(outer).bindings
    for n in names:
        values = [b.value for b in bindings.get(n, ())]
        if values and all(isinstance(v, ast.Constant) and type(v.value) in (int, float)
                          for v in values):
            yield n


def setting_attr(t: Tracer, name: str) -> bool:
    """``self.lam`` only ever assigned a constant, a constant-default argument or a
    Python number (``float(rate)``); or ``self.p`` a buffer of the class
    (``self.register_buffer('p', ...)``, never assigned): no gradient reaches it."""
    key = "attr:" + name
    hit = t._pure.get(key)
    if hit is None:
        hit = False
        cls = t.ctx.class_def
        values = self_assignments(cls, name, t.ctx)  # `self.x   = ...` aligned too
        if values:
            settings = constant_default_args(cls)
            hit = bool(values) and all(
                (isinstance(v, ast.Constant) and isinstance(v.value, (int, float))) or
                (isinstance(v, ast.Name) and v.id in settings) or
                (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                 and v.func.id in ("float", "int") and v.func.id not in t.scope.bindings)
                for v in values)
        elif cls is not None and t.ctx.mentions("register_buffer"):
            hit = registered_buffer(cls, name.partition(".")[2])
        t._pure[key] = hit
    return hit


def pure_loss(t: Tracer, func: ast.expr) -> bool:
    """``criterion`` bound to a ``torch.nn.*Loss()`` (or named like a loss function)."""
    name = dotted(func)
    if name is None:
        return False
    hit = t._pure.get(name)
    if hit is None:
        hit = t._pure[name] = _pure_loss_name(t, name)
    return hit


def _pure_loss_name(t: Tracer, name: str) -> bool:
    """Bound to ``torch.nn.*Loss()``; or, when nothing in the file binds it, named like a
    loss function (``criterion``, ``focal_loss``). A user class bound to it may hold
    learnable weights (ArcFace, uncertainty weighting): then it is not pure."""
    ctx = t.ctx
    values = [unpacked_value(b, name) for b in t.scope.bindings.get(name, ())]
    if not values:  # the module's, listed once per file (each function of a script asks)
        module: dict[str, list[ast.expr | None]] = ctx.memo(
            "origins-module-values", ctx.tree, dict)
        values = module.get(name)  # type: ignore[assignment]
        if values is None:
            values = module[name] = [unpacked_value(b, name) for b in
                                     ctx.scope(ctx.tree).bindings.get(name, ())]
    if not values and name.startswith("self.") and ctx.mentions(f"{name} ="):
        values = self_assignments(ctx.class_def, name, ctx)
    if not values:
        recv, _, last = name.rpartition(".")
        if last[:1].isupper() and any(ch.islower() for ch in last):
            return False  # `EntropyLoss(after_softmax=...)` builds a loss object
        if recv and recv not in ("self", "cls") and \
                recv.partition(".")[0] not in ctx.imports.aliases and \
                not LOSS_CALLABLE_RE.match(recv.rpartition(".")[2]):
            return False  # `self.value_function.compute_loss(x, y)`: the model's method
        return bool(LOSS_CALLABLE_RE.match(last))
    return all(isinstance(u := _unmoved(v), ast.Call)
               and is_torch_loss(ctx.qualified_name(u.func)) for v in values)


def _unmoved(v: ast.expr | None) -> ast.expr | None:
    """``nn.CrossEntropyLoss()`` for ``nn.CrossEntropyLoss().cuda(gpu)`` / ``.to(device)``."""
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in MOVES:
        v = v.func.value
    return v
