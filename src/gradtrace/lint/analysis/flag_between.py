"""Whether a name is made to require grad between its binding and a use (moved out of
:mod:`.grad_sources`, which follows names back through their bindings)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


def flag_set_between(scope: Scope, name: str, start: int, line: int) -> bool:
    """``name.requires_grad = True`` or ``name.requires_grad_()`` (a statement) after the
    binding of ``name`` at ``start`` and before ``line``: the tensor bound there now requires
    grad. A tensor without history becomes a leaf that does (one with history raises at the
    flag); either way a loss read from it has a gradient to give."""
    for m in scope.calls_to("requires_grad_"):  # indexed: a module scope holds thousands
        if m.receiver == name and start < m.stmt.lineno < line \
                and isinstance(m.stmt, ast.Expr) and m.stmt.value is m.call and (
                    not m.call.args or _is_true(m.call.args[0])):
            return True
    return any(start < fb.line < line and _is_true(fb.value)
               for fb in scope.bindings.get(name + ".requires_grad", ()))


def _is_true(v: ast.AST | None) -> bool:
    return isinstance(v, ast.Constant) and v.value is True
