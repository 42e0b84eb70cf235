"""A method that only ever runs while the object is constructed, before another one.

# NOTE [run at construction before the build]
``class Processor: def __init__(self): self.load_model(); ...; self.load_optimizer()`` in
one file, ``class LinearEval(Processor)`` in another overriding ``load_model`` (which turns
``requires_grad`` on or off by a flag) and ``load_optimizer`` (which keeps the trainable
parameters): the unfreeze runs in ``__init__`` before the optimizer is built, so the
optimizer holds what it unfroze. The fact holds when every ``x.name(...)`` call of the
project (its file and the files the reverse index finds, NOTE [reverse index]; an
over-approximation by the method's name) is

- a ``self.name(...)`` in an ``__init__`` with no call of ``self.builder(...)`` on an
  earlier line of that ``__init__``, or
- inside a function itself named ``name`` (it runs only when such a method runs, whose
  outermost calls are the ones above), or
- a ``self.name(...)`` in another class that defines ``name`` itself and is no base of the
  method's class (it calls that class's own method).

No call seen, ``x.name`` read as a value, too many files holding the name: no fact. The
cost is one reverse-index look-up, made only where GT440 would otherwise report.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.per_pass_returns import MAX_READERS, own_method
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


def runs_before_build(ctx: Context, cls: ClassInfo, name: str, builder: str) -> bool:
    """Every call of the method ``name`` of ``cls`` runs in an ``__init__`` before
    ``self.builder()`` (NOTE [run at construction before the build])."""
    from gradtrace.lint.analysis.callers import _method_sites, readers
    found = readers(ctx, f".{name}(".encode(), limit=MAX_READERS)
    if found is None:
        return False
    seen = False
    for octx in [ctx, *found]:
        got = _method_sites(octx, name)
        if got is None:
            return False
        for call, where in got:
            if isinstance(where, FUNCTION_TYPES) and where.name == name \
                    or own_method(octx, call, where, cls):
                continue
            f = call.func
            if not (isinstance(where, FUNCTION_TYPES) and where.name == "__init__"
                    and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    and f.value.id == "self") or _built_before(where, call, builder):
                return False
            seen = True
    return seen


def _built_before(init: ast.AST, call: ast.Call, builder: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == builder and n.lineno <= call.lineno for n in walk(init))
