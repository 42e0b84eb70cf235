"""Whether a detached leaf is trained by an optimizer of its own.

# NOTE [a leaf with its own optimizer]
A dual variable, a temperature or a Lagrange multiplier is a leaf (``self.eta =
torch.tensor(0., requires_grad=True)``) that an optimizer built over it alone trains
(``torch.optim.Adam([self.eta], lr)``) on a loss of its own that reads it undetached
(``eta_loss = w.detach() * (adv.detach() - self.eta) + self.eta``). The network's loss then
reads ``self.eta.detach()`` on purpose: the detach keeps the network's step from moving the
leaf, and the network gets no gradient through it either way. The fact holds when ``attr``
(an attribute of ``self``) is listed in a ``torch.optim`` optimizer's first argument, a list or
tuple made only of ``self`` attributes, and some method of the class other than ``__init__``
reads ``self.attr`` without ``.detach()``/``.data``/``.item()`` and outside an optimizer's
construction. A leaf held with the network's weights in one optimizer (``Adam([*net
.parameters(), self.eta])``) whose every read is detached trains nothing: still reported.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_CUTS = frozenset({"detach", "data", "item", "detach_"})


def _self_attr(n: ast.AST) -> str | None:
    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
        return n.attr
    return None


def own_optimizer_leaf(ctx: Context, cls: ast.ClassDef | None, operand: ast.AST) -> bool:
    """``operand`` is ``self.attr``, a leaf of ``cls`` trained by an optimizer of its own and
    read undetached elsewhere (NOTE [a leaf with its own optimizer])."""
    attr = _self_attr(operand)
    if attr is None or cls is None:
        return False
    facts = ctx.memo("own-optimizer-leaves", cls, lambda: _facts(ctx, cls))
    return attr in facts


def _facts(ctx: Context, cls: ast.ClassDef) -> frozenset[str]:
    owned: set[str] = set()
    in_optim: set[int] = set()
    for n in ast.walk(cls):
        if not isinstance(n, ast.Call) or not n.args:
            continue
        q = ctx.qualified_name(n.func) or ""
        if not q.startswith("torch.optim.") or q.count(".") != 2:
            continue
        for x in ast.walk(n):
            in_optim.add(id(x))
        first = n.args[0]
        if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
            names = [_self_attr(e) for e in first.elts]
            if all(names):
                owned.update(names)  # type: ignore[arg-type]
    if not owned:
        return frozenset()
    cut: set[int] = set()
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and n.attr in _CUTS:
            cut.add(id(n.value))
    read: set[str] = set()
    for m in cls.body:
        if not isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) or m.name == "__init__":
            continue
        for n in ast.walk(m):
            a = _self_attr(n)
            if a in owned and isinstance(n.ctx, ast.Load) \
                    and id(n) not in cut and id(n) not in in_optim:  # type: ignore[attr-defined]
                read.add(a)  # type: ignore[arg-type]
    return frozenset(read)
