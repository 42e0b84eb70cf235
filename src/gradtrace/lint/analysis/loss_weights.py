"""A function named like a loss whose value only weighs a term of its callers' losses.

# NOTE [loss weights]
easyFL's APPLE client has ``loss_scheduler(self, r)``, returning ``0.5 * (np.cos(r * np.pi /
self.L) + 1)``: the weight of a proximal term (``coef = 0.5 * self.mu *
self.loss_scheduler(self.current_round)``, then ``loss += coef * torch.sum((p - p0) ** 2)``).
Named like a loss, and its value reaches the backward, so NOTE [loss evidence] takes it for
one; but it is a factor of a product, not a term of the loss. :func:`weight_only` is True
for a function when every call of it (the file's, at least one; none in the project's other
files, NOTE [reverse index]) is handed no graph (a model's output, or a value the caller
computes that its tracer finds live: :func:`_fed`) and its
value reaches its caller only as a factor of products (through ``*``, ``/``, a sign, and at
most one name the product is bound to, every read of which is such a factor), one of whose
other factors is a call the caller's tracer (:mod:`.origins`) finds live: the term it
weighs (``torch.sum((p - p0) ** 2)``). The loss-path rules then do not take its return for
a loss (GT103's NumPy round trip of its own argument: the round number). A term (``loss +
aux_loss(h)``), a product with numbers or attributes only (``self.lam * aux_loss(h)``), or a
call handed a model's output keeps the function a loss.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.callers import foreign_sites
from gradtrace.lint.analysis.loss_evidence import graph_fed
from gradtrace.lint.analysis.origins import origins
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def weight_only(ctx: Context, fn: ast.AST) -> bool:
    """NOTE [loss weights]: every call of ``fn`` weighs a live term of its caller."""
    def make() -> bool:
        if not isinstance(fn, FUNCTION_TYPES):
            return False
        sites = function_sites(ctx.analysis, fn)
        return bool(sites) and all(
            not _fed(ctx, w, c) and _weighs(ctx, w, c) for c, w in sites  # type: ignore
        ) and foreign_sites(ctx, fn) == []
    return ctx.memo("loss-weights", fn, make)


def _fed(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    """``call`` is handed a graph (a model's output) or a value its caller computes (a call,
    or a name the caller binds) that the caller's tracer finds live; a plain attribute or
    argument (``self.round``) is a setting."""
    if graph_fed(ctx, where, call):
        return True
    scope = ctx.scope(where)
    for a in (*call.args, *(k.value for k in call.keywords)):
        if any(isinstance(n, ast.Call) or isinstance(n, ast.Name) and scope.bindings.get(n.id)
               for n in walk(a)) and origins(ctx, where).trace(
                a, scope.statement_of(call), call.lineno).live:
            return True
    return False


def _weighs(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    parents = ctx.memo("loss-weights-parents", where, lambda: parent_map(where))
    top, others = _climb(call, parents)
    up = parents.get(id(top))
    if isinstance(up, ast.Assign) and up.value is top and len(up.targets) == 1 \
            and isinstance(up.targets[0], ast.Name):
        name = up.targets[0].id
        uses = [n for n in walk(where) if isinstance(n, ast.Name) and n.id == name
                and isinstance(n.ctx, ast.Load)]
        if not uses:
            return False
        for u in uses:
            t2, more = _climb(u, parents)
            if t2 is u or not any(_weighed(ctx, where, o) for o in (*others, *more)):
                return False
        return True
    return top is not call and any(_weighed(ctx, where, o) for o in others)


def _climb(node: ast.AST, parents: dict[int, ast.AST]) -> tuple[ast.AST, list[ast.expr]]:
    """The largest product (``*``, ``/``, a sign) ``node`` is a factor of, and its other
    factors."""
    others: list[ast.expr] = []
    while True:
        p = parents.get(id(node))
        if isinstance(p, ast.BinOp) and isinstance(p.op, (ast.Mult, ast.Div)):
            others.append(p.right if p.left is node else p.left)
        elif not (isinstance(p, ast.UnaryOp) and isinstance(p.op, (ast.USub, ast.UAdd))):
            return node, others
        node = p


def _weighed(ctx: Context, where: ast.AST, o: ast.expr) -> bool:
    """``o`` is a call (or holds one) that the tracer of ``where`` finds live: a term of
    the loss, not a number."""
    if not any(isinstance(n, ast.Call) for n in walk(o)):
        return False
    scope = ctx.scope(where)
    line = getattr(o, "lineno", 0)
    return origins(ctx, where).trace(o, scope.statement_of(o), line).live
