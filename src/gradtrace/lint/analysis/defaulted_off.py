"""A parameter that every call of the file leaves at its false default.

# NOTE [left at a false default]
``def __init__(self, net, lr=1e-3, find_unused=False):`` then ``DDP(net,
find_unused_parameters=find_unused)``: a keyword given a parameter of the enclosing function
is that parameter's value. When the parameter has a false constant default (``False``,
``None``, ``0``), the function is a top-level function or the ``__init__`` of a top-level
class that no class of the file derives from, the file calls it (by its plain name; the
class's constructions for ``__init__``) at least once, and no call passes the parameter (by
keyword, by position, through ``*args`` / ``**kwargs``), nor does the function bind the name
again, the value is the default on every run the file makes: the default is where it is set.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import named_calls
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def left_false(name: str, fn: ast.AST, ctx: Context) -> ast.expr | None:
    """The false default of ``fn``'s parameter ``name`` when every call of the file leaves it
    so (NOTE [left at a false default]); None otherwise."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = fn.args
    pos = [p.arg for p in (*a.posonlyargs, *a.args)]
    defaults = dict(zip(pos[len(pos) - len(a.defaults):], a.defaults))
    defaults.update((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    d = defaults.get(name)
    if not (isinstance(d, ast.Constant) and not d.value):
        return None
    callee = _called_name(fn, ctx)
    if callee is None:
        return None
    if fn.name == "__init__":
        pos = pos[1:]
    index = pos.index(name) if name in pos else None
    calls = named_calls(ctx, callee)
    if not calls:
        return None
    for call, _ in calls:
        if any(isinstance(x, ast.Starred) for x in call.args) \
                or any(k.arg in (None, name) for k in call.keywords) \
                or index is not None and len(call.args) > index:
            return None
    if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
           for n in walk(fn)):
        return None
    return d


def _called_name(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> str | None:
    """The plain name the file calls ``fn`` by: its own (a top-level function) or its class's
    (``__init__`` of a top-level class no class of the file derives from)."""
    if fn in ctx.tree.body:
        return fn.name
    if fn.name != "__init__":
        return None
    cls = next((c for c in ctx.tree.body if isinstance(c, ast.ClassDef) and fn in c.body), None)
    if cls is None or any(isinstance(b, ast.Name) and b.id == cls.name
                          for c in ctx.analysis.classes.values() for b in c.node.bases):
        return None
    return cls.name
