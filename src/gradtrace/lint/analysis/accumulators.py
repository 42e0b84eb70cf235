"""Methods of the file's classes that add what they are given into the object's state.

# NOTE [accumulating methods]
``class AverageMeter: def update(self, val, n=1): self.sum += val * n`` keeps a running total
on the object: a call ``meter.update(loss, bs)`` made on every pass of a training loop adds
``loss`` (with its graph, unless the caller passes ``loss.item()``) into ``meter.sum``, which
outlives the loop: the graph of every pass stays reachable. A parameter is *accumulated* when
the method adds it, not cut (``.item()``, ``.detach()``, ``float(...)``), into a ``self``
attribute: ``self.x += <expr>``, ``self.x = self.x + <expr>``, ``self.x.append(<expr>)``. The
caller's object must be an instance of the class (NOTE [kinds]); the GT505 reading then treats
the call as ``obj += arg``.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.cuts import NO_HISTORY_METHODS
from gradtrace.lint.analysis.kinds import OBJECT
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

Fn = ast.FunctionDef | ast.AsyncFunctionDef
NUMBER_CALLS = frozenset({"float", "int", "round", "bool"})


def accumulated_args(ctx: Context, call: ast.Call, scope: Scope
                     ) -> Iterator[tuple[str, ast.expr]]:
    """(the object, the argument) for each argument of ``obj.method(...)`` that the method
    of the object's class adds into the object's state (NOTE [accumulating methods])."""
    f = call.func
    if not isinstance(f, ast.Attribute) or (obj := dotted(f.value)) is None:
        return
    k = ctx.analysis.kind(f.value, scope, call.lineno)
    if k is None or k.what != OBJECT or k.cls not in ctx.analysis.classes:
        return
    m = ctx.analysis.classes[k.cls].methods.get(f.attr)
    if m is None:
        return
    kept = ctx.memo("accumulated-params", m, lambda: _accumulated(m))
    if not kept:
        return
    for name, arg in ctx.analysis.arguments(m, call).items():
        if name in kept:
            yield obj, arg


def _accumulated(m: Fn) -> frozenset[str]:
    params = {a.arg for a in (*m.args.posonlyargs, *m.args.args)} - {"self"}
    out: set[str] = set()
    for s in walk(m):
        added: ast.expr | None = None
        if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add) \
                and _on_self(s.target):
            added = s.value
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and _on_self(s.targets[0]) \
                and isinstance(s.value, ast.BinOp) and isinstance(s.value.op, ast.Add) \
                and dotted(s.value.left) == dotted(s.targets[0]):
            added = s.value.right
        elif isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) \
                and s.func.attr == "append" and len(s.args) == 1 and _on_self(s.func.value):
            added = s.args[0]
        if added is not None:
            out |= _uncut_names(added) & params
    return frozenset(out)


def _on_self(t: ast.AST) -> bool:
    while isinstance(t, ast.Subscript):
        t = t.value
    return isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"


def _uncut_names(e: ast.AST) -> set[str]:
    """Names ``e`` reads outside a call that cuts the graph."""
    if isinstance(e, ast.Name):
        return {e.id}
    if isinstance(e, ast.Call) and (
            isinstance(e.func, ast.Attribute) and e.func.attr in NO_HISTORY_METHODS
            or isinstance(e.func, ast.Name) and e.func.id in NUMBER_CALLS):
        return set()
    out: set[str] = set()
    for c in ast.iter_child_nodes(e):
        out |= _uncut_names(c)
    return out


def calls_accumulator(ctx: Context, text: str) -> bool:
    """``text`` spells a call ``.<m>(`` of an accumulating method of the file's classes."""
    names: frozenset[str] = ctx.memo("accumulating-methods", ctx.tree, lambda: frozenset(
        m.name for c in ctx.analysis.classes.values() for m in c.methods.values()
        if m.name != "__init__" and ctx.memo("accumulated-params", m, lambda: _accumulated(m))))
    return any(f".{n}(" in text for n in names)
