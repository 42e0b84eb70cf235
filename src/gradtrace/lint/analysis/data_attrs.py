"""``self.x`` that only ever holds what a method was handed as data.

# NOTE [data attributes]
A trainer object stores its batch on itself in one method and reads it in another:
``def set_input(self, image, label): self.real_A, self.label_A = image, label``, then
``self.crit(self.net_f(fake.detach()), self.label_A)`` in ``backward_G``. The tracer takes
``self.label_A`` as live (an attribute may hold a layer's output), so a loss term whose only
path to the stepped network is a cut still looked live through the label (GT109 missed
joliGEN's semantic loss on ``fake_B.detach()``). :func:`data_attribute` says ``self.x`` holds
no graph when every store of it in the class (NOTE [attribute origins]: plain assignments,
``self.a, self.b = a, b`` paired up) stores a parameter of the storing method, not rebound
there, that the method's tracer reads as data (a target-like argument, one every caller of
the method hands data: NOTE [parameters given data]). Any other store leaves it live.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.cuts import DEAD, self_assignments
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer


def data_attribute(t: Tracer, cls: ast.ClassDef | None, name: str) -> bool:
    """NOTE [data attributes]: every store of ``name`` (``self.x``) in ``cls`` is a parameter
    its method holds as data."""
    from gradtrace.lint.analysis.origins import origins  # (origins imports this module's user)
    values = self_assignments(cls, name, t.ctx)
    if not values:
        return False
    parents = file_parents(t.ctx)
    for v in values:
        if not isinstance(v, ast.Name):
            return False
        fn = parents.get(id(v))
        while fn is not None and not isinstance(fn, FUNCTION_TYPES):
            fn = parents.get(id(fn))
        if fn is None or v.id not in _params(fn) or t.ctx.scope(fn).bindings.get(v.id):
            return False
        if fn is t.scope.node or origins(t.ctx, fn)._param(v.id) is not DEAD:
            return False
    return True


def _params(fn: ast.AST) -> set[str]:
    a = fn.args  # type: ignore[attr-defined]
    return {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)} - {"self", "cls"}
