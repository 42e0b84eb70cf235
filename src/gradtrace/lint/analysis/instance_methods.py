"""The method of a class of the file that ``obj.method(...)`` runs, ``obj`` an instance of it.

# NOTE [methods of held objects]
``builder = Builder(cfg); opt, sched = builder.make(model)`` runs ``Builder.make``, a method
of a plain class of the file (a builder, a manager, a trainer's helper object): what it
returns is what its ``return`` statements give (read like a function of the file: the kinds of
what it returns, an optimizer's owners renamed to the caller's arguments, another object's
``self`` dropped), so ``opt`` is an optimizer and ``sched`` a scheduler as if built in the
caller. Said when the analysis layer knows ``obj`` is an instance of a plain (non-module)
class of the file (NOTE [kinds]: ``OBJECT``) and the class or a base of the file defines
``method`` (NOTE [inherited methods]); a module's methods (``model.encode(x)``) and objects
of other files are left alone.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import OBJECT

if TYPE_CHECKING:
    from gradtrace.lint.analysis.facts import Analysis
    from gradtrace.lint.flow import Scope


def held_method(a: Analysis, call: ast.Call, scope: Scope, line: int, depth: int = 0
                ) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """``Cls.method`` for ``obj.method(...)`` with ``obj`` a name bound to an instance of the
    plain class ``Cls`` of the file (NOTE [methods of held objects]); None otherwise."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id not in ("self", "cls")) or f.value.id in a.classes \
            or not any(not c.is_module and f.attr in c.methods for c in a.classes.values()):
        return None  # (no plain class of the file defines a method of that name)
    k = a._kind(f.value, scope, line, depth + 1)
    if k is None or k.what != OBJECT or k.cls not in a.classes:
        return None
    return a.classes[k.cls].method(f.attr)
