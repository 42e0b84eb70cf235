"""GT301's tests around a rebinding update ``w = w - lr * w.grad``: whether the code makes
the name a fresh leaf again (an attack loop's re-leafing) and where ``w.grad`` is read after
it."""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import COMPOUND, reads_grad_of


RELEAF_ATTRS = frozenset({"detach", "requires_grad_", "detach_", "data", "clone"})


def _releafed(scope: Scope, name: str, stmt: ast.stmt, no_grad: bool) -> bool:
    """Whether the code makes ``name`` a fresh leaf again (PGD/attack loops do), so the
    rebinding is intended: another binding of ``name`` from ``.detach()``/``.data``/
    ``requires_grad_()``, an in-place ``detach_()``/``retain_grad()``, or -- when the rebinding
    runs under ``no_grad`` -- a later ``requires_grad_()`` / ``requires_grad = True``."""
    loops = scope.loops_of(stmt)
    for b in scope.bindings.get(name, ()):
        if b.stmt is stmt or isinstance(b.stmt, ast.AugAssign) or b.value is None:
            continue
        if b.line > stmt.lineno or (loops and b.line >= loops[-1].lineno):
            if any(isinstance(n, ast.Attribute) and n.attr in RELEAF_ATTRS
                   for n in walk(b.value)):
                return True
    for m in scope.method_calls:
        if m.receiver == name and m.method in ("detach_", "retain_grad"):
            return True
        if no_grad and m.receiver == name and m.method == "requires_grad_":
            return True
    return no_grad and bool(scope.bindings.get(f"{name}.requires_grad"))


def _grad_read_after(scope: Scope, name: str, line: int) -> int | None:
    """The first line after ``line`` reading ``name.grad``."""
    for s in scope.stmts:
        if s.lineno > line and not isinstance(s, COMPOUND) and reads_grad_of(s, name):
            return s.lineno
    return None
