"""A module built from a class of another file of the project that holds no weights there.

# NOTE [weightless class of another file]
``self.smoothing = GaussianSmooth(w, sig)`` in ``__init__`` with ``GaussianSmooth`` imported
from another file of the project: the project index (NOTE [project index]) finds the class,
and the same test (NOTE [weightless class of the file]) runs in that file's context; then
``self.smoothing(grad)`` is as live as ``grad``, as a weightless class of the file is. The
class the index cannot find: unknown (not weightless). Cost: asked only of a module a tracer
judges (a call of a ``self.<x>`` or of a name the kinds layer calls a module); the index reads
an imported file once per process (cached), so the cost is per project, not per file.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.foreign_kinds import DEFINITIONS
from gradtrace.lint.analysis.weightless_classes import weightless_file_class

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope


def foreign_weightless(call: ast.expr | None, ctx: Context) -> bool:
    """``call`` builds a module of a class of another file of the project that holds no
    weights there (NOTE [weightless class of another file])."""
    if not isinstance(call, ast.Call) or not DEFINITIONS:
        return False
    got = DEFINITIONS[0](ctx, call.func)
    if got is None or not isinstance(got[1], ast.ClassDef):
        return False
    octx, node = got
    return weightless_file_class(node.name, octx)


def foreign_weightless_value(value: ast.expr, scope: Scope, ctx: Context) -> bool:
    """``value`` is a call of a weightless class of another file of the project, or
    ``self.<x>`` that ``__init__`` builds with one (NOTE [weightless class of another file])."""
    if isinstance(value, ast.Call):
        return foreign_weightless(value, ctx)
    if not (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
            and value.value.id == "self"):
        return False
    cls = ctx.analysis.class_of(scope.node)
    info = cls.init_attrs.get(value.attr) if cls is not None else None
    return info is not None and foreign_weightless(info.value, ctx)
