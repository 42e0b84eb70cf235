"""A function fetched from a model's method and called: what it hands back.

# NOTE [callable fetched from a method]
A lip-reading validator counts matches: ``validator_function = model.validator_function()``,
then ``count += validator_function(outputs, labels)`` over the batches. The method (another
file) returns ``self.backend.validator``; each backend class stores ``self.validator =
_validate``, a function of its file that compares arg-max indices and returns a Python
``int``. GT505 read ``count`` as a sum keeping every batch's graph. :func:`fetched_graphless`
follows the three hops by name, over-approximating each (the receivers' types are not
resolved, as for the methods of NOTE [reverse index]):

* the called name is bound once in its function, from ``<receiver>.m(...)``, and is no
  parameter;
* every ``def m`` of the project (the files whose bytes hold ``def m(``, this one included;
  at least one) is a method each of whose ``return`` gives ``self.<...>.c`` (the same last
  name ``c`` for all; a bare ``return`` / falling off the end aside);
* every store of an attribute ``c`` in the project's files holding the word (``x.c = v``, a
  tuple target, ``setattr``, an augmented store: any other than ``self.c = f`` makes it
  unknown; at least one) hands it ``f``, a top-level function of that file whose every
  ``return`` holds no graph (NOTE [graphless by construction]).

Anything else, too many files holding a word, a buffer: unknown (the value may hold a graph).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.callers import readers
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def fetched_graphless(ctx: Context, where: ast.AST, call: ast.Call,
                      graphless: Callable[[Context, ast.AST], bool]) -> bool:
    """NOTE [callable fetched from a method]. ``graphless``: :func:`.graphless_returns.
    returns_graphless`, handed down (no import cycle)."""
    f = call.func
    if not isinstance(f, ast.Name) or not isinstance(where, FUNCTION_TYPES):
        return False
    a = where.args
    if any(p.arg == f.id for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]):
        return False
    binds = [n for n in ast.walk(where) if isinstance(n, (ast.Assign, ast.AugAssign,
                                                          ast.AnnAssign, ast.For, ast.With,
                                                          ast.NamedExpr, ast.comprehension))
             and any(isinstance(t, ast.Name) and t.id == f.id for t in _targets(n))]
    if len(binds) != 1 or not isinstance(binds[0], ast.Assign) or \
            len(binds[0].targets) != 1 or not isinstance(binds[0].targets[0], ast.Name):
        return False
    v = binds[0].value
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute)):
        return False
    memo = ctx.memo("fetched-graphless", ctx.tree, dict)
    if v.func.attr not in memo:
        memo[v.func.attr] = False  # recursion guard
        memo[v.func.attr] = _method_graphless(ctx, v.func.attr, graphless)
    return memo[v.func.attr]


def _targets(n: ast.AST) -> list[ast.AST]:
    if isinstance(n, ast.Assign):
        return [x for t in n.targets for x in ast.walk(t)]
    if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        return [n.target]
    if isinstance(n, (ast.For, ast.comprehension)):
        return list(ast.walk(n.target))
    return [x for i in n.items if i.optional_vars is not None  # type: ignore[attr-defined]
            for x in ast.walk(i.optional_vars)]


def _method_graphless(ctx: Context, name: str,
                      graphless: Callable[[Context, ast.AST], bool]) -> bool:
    others = readers(ctx, f"def {name}(".encode())
    if others is None:
        return False
    last: set[str] = set()
    found = 0
    for octx in [ctx, *others]:
        for cls in ast.walk(octx.tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            for m in cls.body:
                if isinstance(m, FUNCTION_TYPES) and m.name == name:
                    found += 1
                    for r in ast.walk(m):
                        if isinstance(r, ast.Return) and r.value is not None:
                            c = _self_chain(r.value)
                            if c is None:
                                return False
                            last.add(c)
        defs = [d for d in ast.walk(octx.tree) if isinstance(d, FUNCTION_TYPES)
                and d.name == name]
        if len(defs) != sum(1 for cls in ast.walk(octx.tree) if isinstance(cls, ast.ClassDef)
                            for m in cls.body if m in defs):
            return False  # a `def name` outside a class body
    if not found or len(last) != 1:
        return False
    return _stored_graphless(ctx, last.pop(), graphless)


def _self_chain(e: ast.expr) -> str | None:
    """``self.a.c`` -> ``c`` (at least ``self.c``); anything else None."""
    if not isinstance(e, ast.Attribute):
        return None
    n: ast.expr = e
    while isinstance(n, ast.Attribute):
        n = n.value
    return e.attr if isinstance(n, ast.Name) and n.id == "self" else None


def _stored_graphless(ctx: Context, attr: str,
                      graphless: Callable[[Context, ast.AST], bool]) -> bool:
    others = readers(ctx, attr.encode())
    if others is None:
        return False
    stores = 0
    for octx in [ctx, *others]:
        tops = {d.name: d for d in octx.tree.body if isinstance(d, FUNCTION_TYPES)}
        for n in ast.walk(octx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                    n.func.id == "setattr":
                return False
            if not isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                continue
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            hit = [t for tt in targets for t in ast.walk(tt)
                   if isinstance(t, ast.Attribute) and t.attr == attr
                   and isinstance(t.ctx, ast.Store)]
            if not hit:
                continue
            if not isinstance(n, ast.Assign) or len(n.targets) != 1 or hit[0] is not \
                    n.targets[0] or not (isinstance(hit[0].value, ast.Name)
                                         and hit[0].value.id == "self"):
                return False
            fn = tops.get(n.value.id) if isinstance(n.value, ast.Name) else None
            if fn is None or not graphless(octx, fn):
                return False
            stores += 1
    return stores > 0
