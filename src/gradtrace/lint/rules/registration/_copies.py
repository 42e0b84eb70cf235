"""GT401's elements made by copying a layer: what ``copy.deepcopy(x)`` builds.

# NOTE [copied layers]
``self.layers = [copy.deepcopy(layer) for _ in range(N)]`` (the annotated Transformer's
``clones``): ``copy.deepcopy`` of a module is a new module of the same class with its own
parameters, so the element owns parameters exactly when ``layer`` does. ``layer`` is read
where ``__init__`` gets it: bound once there to a call (``layer = EncoderLayer(d)``), or a
parameter of ``__init__`` annotated with a class (``layer: EncoderLayer``: the element is
taken as a call of that class, judged like any other), or passed by the callers of the class
in the file (:func:`~._callers.passed_in`). Anything else (a parameter with no annotation and
no caller in the file) stays unknown: the copy is no element the rule judges.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.rules.registration._bound_once import bound_once
from gradtrace.lint.rules.registration._callers import passed_in
from gradtrace.lint.rules.registration._wrapped_locals import with_wrapped_locals

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

COPIES = frozenset({"copy.deepcopy", "copy.copy"})


def uncopied(elts: list[ast.AST], init: ast.FunctionDef | None, cls: str, ctx: Context
             ) -> list[ast.AST]:
    """``elts`` with every ``copy.deepcopy(x)`` replaced by what ``x`` holds in ``init``
    (NOTE [copied layers]); the others as they are, a container built from a local list of
    ``init`` followed by that list's elements (NOTE [container of a local list])."""
    out: list[ast.AST] = []
    for e in with_wrapped_locals(elts, init, ctx):
        if init is None or not isinstance(e, ast.Call) or ctx.call_name(e) not in COPIES \
                or len(e.args) != 1 or not isinstance(e.args[0], ast.Name):
            out.append(e)
            continue
        out.extend(_held(e.args[0], e, init, cls, ctx))
    return out


def _held(x: ast.Name, at: ast.Call, init: ast.FunctionDef, cls: str, ctx: Context
          ) -> list[ast.AST]:
    a = init.args
    params = {p.arg: p for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    p = params.get(x.id)
    if p is None:
        stmt = next((s for s in ast.walk(init) if isinstance(s, ast.stmt)
                     and s.lineno <= at.lineno <= (s.end_lineno or 0)
                     and not isinstance(s, (ast.FunctionDef, ast.For, ast.If, ast.With,
                                            ast.While, ast.Try))), None)
        v = bound_once(x, stmt, init, ctx) if stmt is not None else x
        return [v] if v is not x else []
    if isinstance(p.annotation, (ast.Name, ast.Attribute)):
        call = ast.Call(func=p.annotation, args=[], keywords=[])
        return [ast.copy_location(call, p.annotation)]
    got = passed_in(x, init, cls, ctx, element=True)
    return list(got[0]) if got is not None else []
