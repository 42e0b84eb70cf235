"""``self.x`` that only ever holds what a method was handed as data.

# NOTE [data attributes]
A trainer object stores its batch on itself in one method and reads it in another:
``def set_input(self, image, label): self.real_A, self.label_A = image, label``, then
``self.crit(self.net_f(fake.detach()), self.label_A)`` in ``backward_G``. The tracer takes
``self.label_A`` as live (an attribute may hold a layer's output), so a loss term whose only
path to the stepped network is a cut still looked live through the label (GT109 missed
joliGEN's semantic loss on ``fake_B.detach()``). :func:`data_attribute` says ``self.x`` holds
no graph when every store of it is a plain assignment in a method of the class other than
``__init__`` (what a call is handed, a batch; not construction settings) (``self.a,
self.b = a, b`` paired up; no ``+=``, item store, ``append``, ``setattr``, nor a store from
outside the class: NOTE [attribute origins]) of a parameter of that method, not rebound there,
that the method's tracer reads as data (a target-like argument, or one every caller of the
method hands data: NOTE [parameters given data]). Anything else leaves it live.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.cuts import self_assignments
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer
    from gradtrace.lint.context import Context

MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "copy_",
                      "__setitem__"})


def data_attribute(ctx: Context, cls: ast.ClassDef, attr: str,
                   tracer_of: Callable[[Context, ast.AST], Tracer]) -> bool:
    """NOTE [data attributes]: every store of ``self.<attr>`` in ``cls`` is a parameter its
    method holds as data. ``tracer_of``: :func:`.origins.origins`, handed down (no cycle)."""
    name = "self." + attr
    values = self_assignments(cls, name, ctx)
    if not values or not all(isinstance(v, ast.Name) for v in values) \
            or "setattr" in ctx.code:
        return False
    held = []
    for v in values:
        fn = _method_of(cls, v)
        if fn is None or fn.name == "__init__" or v.id not in _params(fn) \
                or ctx.scope(fn).bindings.get(v.id):  # type: ignore[attr-defined]
            return False  # (the constructor's arguments are settings: NOTE [attribute origins])
        held.append((fn, v))
    if _mutated(cls, name):
        return False
    return not any(tracer_of(ctx, fn).trace(v, None, v.lineno).live for fn, v in held)


def _method_of(cls: ast.ClassDef, v: ast.AST) -> ast.AST | None:
    """The method of ``cls`` (its body's own defs) whose lines hold ``v``."""
    line = getattr(v, "lineno", 0)
    return next((f for f in cls.body if isinstance(f, FUNCTION_TYPES)
                 and f.lineno <= line <= (f.end_lineno or f.lineno)), None)


def _mutated(cls: ast.ClassDef, name: str) -> bool:
    """``self.x += v``, ``self.x[i] = v``, ``self.x.append(v)`` somewhere in ``cls``."""
    for n in walk(cls):
        if isinstance(n, ast.AugAssign) and dotted(n.target) == name:
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) \
                and dotted(n.value) == name:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in MUTATORS and dotted(n.func.value) == name:
            return True
    return False


def _params(fn: ast.AST) -> set[str]:
    a = fn.args  # type: ignore[attr-defined]
    return {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
