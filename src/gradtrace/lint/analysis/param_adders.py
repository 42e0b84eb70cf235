"""A call that gives a module new parameters, through the functions and methods of the file.

# NOTE [parameters added through calls]
``register_extra(model.module)`` whose body walks ``module.modules()`` and, for each
``isinstance(layer, Side)``, calls ``layer.grow()``, whose body assigns ``self.w =
nn.Parameter(...)``: the call adds a parameter to the module it is given. Read from the code:
the function a call runs (NOTE [backward through calls]; inside ``if isinstance(v, Cls):`` a
method called on ``v`` is ``Cls``'s, from the test, not from its name), and an assignment of a
new ``nn.Parameter`` or of a new layer that owns parameters to an attribute of ``self``, of a
parameter of the function, or of a loop variable. Followed ``MAX_DEPTH`` calls deep, each
function once.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.called_backwards import called_function
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MAX_DEPTH = 3


def added_parameter(ctx: Context, where: ast.AST, call: ast.Call,
                    is_new: Callable[[ast.expr], bool], depth: int = MAX_DEPTH,
                    seen: set[int] | None = None, runs: ast.AST | None = None
                    ) -> ast.Assign | None:
    """The assignment of a new parameter (or layer: ``is_new``) that ``call`` runs
    (NOTE [parameters added through calls]; ``runs``: the function it runs, when the caller
    knows it); None when none is seen."""
    seen = set() if seen is None else seen
    fn = runs or called_function(ctx, where, call) or _narrowed_method(ctx, where, call)
    if not isinstance(fn, FUNCTION_TYPES) or id(fn) in seen or depth <= 0:
        return None
    seen.add(id(fn))
    a = fn.args
    roots = {"self"} | {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    for n in bfs_walk(fn):
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name):
            roots.add(n.target.id)
    calls: list[ast.Call] = []
    for n in bfs_walk(fn):
        if n is not fn and isinstance(n, (*FUNCTION_TYPES, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Attribute):
            d = dotted(n.targets[0])
            if d is not None and d.partition(".")[0] in roots and not d.endswith(".data") \
                    and is_new(n.value):
                return n
        elif isinstance(n, ast.Call):
            calls.append(n)
    for c in calls:
        got = added_parameter(ctx, fn, c, is_new, depth - 1, seen)
        if got is not None:
            return got
    return None


def _narrowed_method(ctx: Context, where: ast.AST, call: ast.Call) -> ast.AST | None:
    """``v.method()`` inside ``if isinstance(v, Cls):`` of ``where``: ``Cls.method`` (a class
    of the file)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        return None
    for n in bfs_walk(where):
        if not isinstance(n, ast.If):
            continue
        t = n.test
        if isinstance(t, ast.Call) and isinstance(t.func, ast.Name) \
                and t.func.id == "isinstance" and len(t.args) == 2 \
                and isinstance(t.args[0], ast.Name) and t.args[0].id == f.value.id \
                and isinstance(t.args[1], ast.Name) \
                and any(c is call for s in n.body for c in ast.walk(s)):
            cls = ctx.analysis.classes.get(t.args[1].id)
            return cls.method(f.attr) if cls is not None else None
    return None
