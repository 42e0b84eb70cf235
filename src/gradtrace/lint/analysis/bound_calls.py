"""A name bound to an object's own ``__call__``: calling the name calls the object.

``forward_fn = module.__call__`` then ``s_logit = forward_fn(fake)`` runs ``module`` on
``fake`` exactly as ``module(fake)`` would (the data-free model-extraction loops keep the
student's call in a variable). The tracers read such a call as the call of the object.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.reach import value_of

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


def called_object(scope: Scope, call: ast.Call, line: int) -> ast.Call | None:
    """``call`` (``f(args)``) rewritten as a call of the object when ``f`` was last bound,
    before ``line``, to ``obj.__call__``; None otherwise."""
    func = call.func
    if not isinstance(func, ast.Name):
        return None
    b = scope.binding_before(func.id, line)
    value = value_of(b) if b is not None else None
    if not (isinstance(value, ast.Attribute) and value.attr == "__call__"):
        return None
    return ast.copy_location(ast.Call(func=value.value, args=call.args,
                                      keywords=call.keywords), call)
