"""What a constructing call gives each argument of a class's ``__init__``.

Shared by NOTE [module results] (:func:`module_results.constructor_values`) and by
NOTE [looped layers] (which also counts a dict argument as true).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.statement_shapes import argument_default

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo


def init_arguments(info: ClassInfo, call: ast.Call, where: ast.AST | None
                   ) -> Iterator[tuple[str, ast.expr | None]]:
    """``(parameter, expression)`` for each argument of ``__init__``: what ``call`` gives it,
    else its default; a plain name passed on from ``where`` (``Conv(c, act=act)`` in another
    ``__init__``) stands for that function's default of it. Nothing when ``__init__`` is not
    the class's own or ``call`` spreads ``*args`` or ``**kwargs``."""
    init = info.methods.get("__init__")
    if init is None or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return
    a = init.args
    params = [p.arg for p in (*a.posonlyargs, *a.args)][1:]
    given: dict[str, ast.expr] = dict(zip(params, call.args))
    given.update((k.arg, k.value) for k in call.keywords if k.arg)
    for p in (*params, *(x.arg for x in a.kwonlyargs)):
        v = given.get(p) or argument_default(p, init)
        if isinstance(v, ast.Name) and where is not None and p in given:
            v = argument_default(v.id, where)
        yield p, v
