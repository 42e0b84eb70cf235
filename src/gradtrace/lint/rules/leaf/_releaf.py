"""GT301's tests around a rebinding update ``w = w - lr * w.grad``: whether the code makes
the name a fresh leaf again (an attack loop's re-leafing) and where ``w.grad`` is read after
it."""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Binding, Scope
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
            if _releaf_value(b.value) or b.line > stmt.lineno and _rebuilt_from_cut(
                    scope, name, b):
                return True
    for m in scope.method_calls:
        if m.receiver == name and m.method in ("detach_", "retain_grad"):
            return True
        if no_grad and m.receiver == name and m.method == "requires_grad_":
            return True
    return no_grad and bool(scope.bindings.get(f"{name}.requires_grad"))


def _releaf_value(v: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in RELEAF_ATTRS for n in walk(v))


def _rebuilt_from_cut(scope: Scope, name: str, b: Binding) -> bool:
    """A later binding that no longer reads ``name`` and is built from a name cut just
    before (ART's hidden-trigger attack: ``pert = clamp(poison - orig, ...).detach_()``, then
    ``poison = pert + orig``, re-armed by ``poison.requires_grad_()`` on the next pass)."""
    assert b.value is not None
    reads = {n.id for n in walk(b.value) if isinstance(n, ast.Name)}
    if name in reads:
        return False
    for r in reads:
        last = scope.binding_before(r, b.line)
        if last is not None and last.value is not None and _releaf_value(last.value):
            return True
    return False


def _grad_read_after(scope: Scope, name: str, line: int) -> int | None:
    """The first line after ``line`` reading ``name.grad``."""
    for s in scope.stmts:
        if s.lineno > line and not isinstance(s, COMPOUND) and reads_grad_of(s, name):
            return s.lineno
    return None
