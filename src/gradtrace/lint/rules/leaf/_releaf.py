"""GT301's tests around a rebinding update ``w = w - lr * w.grad``: whether the code makes
the name a fresh leaf again (an attack loop's re-leafing) and where ``w.grad`` is read after
it."""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Binding, Scope
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.leaf._tensors import COMPOUND, reads_grad_of


RELEAF_ATTRS = frozenset({"detach", "requires_grad_", "detach_", "data", "clone"})
# constructors that copy (or wrap) a tensor's data into a new leaf, whatever its history:
# `Variable(x, requires_grad=True)` (checked on torch 2.13: `is_leaf`, no `grad_fn`),
# `torch.tensor(x, requires_grad=True)`; `torch.as_tensor(x)` returns `x` itself, no leaf
LEAF_MAKERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable",
                         "torch.tensor"})


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
            if _releaf_value(b.value) or _leaf_made(scope, b.value) or b.line > stmt.lineno and _rebuilt_from_cut(
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


def _leaf_made(scope: Scope, v: ast.AST) -> bool:
    """``x = V(x, requires_grad=True)`` (``from torch.autograd import Variable as V``) or
    ``torch.tensor(x, requires_grad=True)``: a new leaf made from the data, asking for grad."""
    if not isinstance(v, ast.Call) or scope.ctx.qualified_name(v.func) not in LEAF_MAKERS:
        return False
    flag = next((k.value for k in v.keywords if k.arg == "requires_grad"), None)
    if flag is None and len(v.args) > 1 and "Variable" in (scope.ctx.qualified_name(
            v.func) or ""):
        flag = v.args[1]  # `Variable(data, requires_grad)`
    return isinstance(flag, ast.Constant) and flag.value is True


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
