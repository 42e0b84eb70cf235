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

The same holds for a leaf the function trains itself: ``x_in = x_in.detach().clone()``, then
``x_in.requires_grad = True`` (or ``x_in.requires_grad_()``) and ``opt = optim.Adam([x_in])``
(guided motion diffusion's test-time refinement of a sampled motion; latent and input
optimisation): the optimizer over the new leaf is what the loss is for. An optimizer over the
model's parameters next to it (the re-wrap as a band-aid) keeps the finding.
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
    """Every cut of a term reaches the loss through a probed leaf, or a leaf the function's
    own optimizer trains (NOTE [probed leaf]); the backward is at ``line``."""
    read = {n.value.id for n in walk(scope.node) if isinstance(n, ast.Attribute)
            and n.attr == "grad" and isinstance(n.value, ast.Name)
            and isinstance(n.ctx, ast.Load) and n.lineno > line}
    trained = _optimized_names(scope)
    made = _made_leaves(scope, line)
    return bool(cuts) and bool(read | trained) and all(any(
        (b := scope.binding_before(name, line)) is not None and (
            name in read and _new_leaf(b.value)
            or name in trained and (_new_leaf(b.value) or name in made))
        for name, _ in c.via) for c in cuts)


def _optimized_names(scope: Scope) -> set[str]:
    """Names listed in the parameter list of an optimizer built here: a ``torch.optim`` class,
    or an object the function both clears and steps (``opt.zero_grad()``, ``opt.step()``)."""
    stepped = {m.receiver for m in scope.calls_to("step")} & {
        m.receiver for m in scope.calls_to("zero_grad")}
    out: set[str] = set()
    for s in walk(scope.node):
        n = s.value if isinstance(s, ast.Assign) else None
        if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], (ast.List, ast.Tuple)) \
                and ((scope.ctx.qualified_name(n.func) or "").startswith("torch.optim.") or any(
                    isinstance(t, ast.Name) and t.id in stepped for t in s.targets)):  # type: ignore[union-attr]
            out.update(e.id for e in n.args[0].elts if isinstance(e, ast.Name))
    return out


def _made_leaves(scope: Scope, line: int) -> set[str]:
    """Names set to require grad by a statement before ``line``: ``x.requires_grad = True``,
    ``x.requires_grad_()``."""
    out: set[str] = set()
    for s in walk(scope.node):
        if getattr(s, "lineno", line) >= line:
            continue
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) \
                and s.value.value is True:
            out.update(t.value.id for t in s.targets if isinstance(t, ast.Attribute)
                       and t.attr == "requires_grad" and isinstance(t.value, ast.Name))
        elif isinstance(s, ast.Expr) and _new_leaf(s.value) \
                and isinstance(s.value.func.value, ast.Name):  # type: ignore[union-attr]
            out.add(s.value.func.value.id)  # type: ignore[union-attr]
    return out
