"""A new leaf whose own gradient the function reads after the backward (GT105, GT106).

# NOTE [probed leaf]
``t = torch.tensor(yhat.data, requires_grad=True)``, a loss of ``t``, ``loss.backward()``,
then ``t.grad`` read: the value was re-wrapped into a new leaf so that backward differentiates
with respect to it (a hand-derived gradient checked against torch's, micrograd's ``Value``
next to a tensor), not to train anything upstream of the cut. A cut whose path to the loss
passes through a name bound to a leaf made there (a ``requires_grad=True`` keyword, or
``requires_grad_()``) whose ``.grad`` is read after the backward in the same function is no
lost gradient. Without the read (the re-wrap as a band-aid so that ``backward()`` runs) it
is still reported.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.cuts import Cut
    from gradtrace.lint.flow import Scope


def _new_leaf(v: ast.expr | None) -> bool:
    if not isinstance(v, ast.Call):
        return False
    if isinstance(v.func, ast.Attribute) and v.func.attr == "requires_grad_" and not any(
            isinstance(a, ast.Constant) and a.value is False for a in v.args):
        return True
    return any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in v.keywords)


def probed_leaf(scope: Scope, cuts: tuple[Cut, ...], line: int) -> bool:
    """Every cut of a term reaches the loss through a probed leaf (NOTE [probed leaf]); the
    backward is at ``line``."""
    read = {n.value.id for n in walk(scope.node) if isinstance(n, ast.Attribute)
            and n.attr == "grad" and isinstance(n.value, ast.Name)
            and isinstance(n.ctx, ast.Load) and n.lineno > line}
    return bool(cuts) and bool(read) and all(any(
        name in read and (b := scope.binding_before(name, line)) is not None
        and _new_leaf(b.value) for name, _ in c.via) for c in cuts)
