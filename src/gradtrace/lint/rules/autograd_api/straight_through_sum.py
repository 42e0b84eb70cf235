"""GT731: a straight-through estimator that adds back the hard value instead of the soft one.

# NOTE [straight-through term]
The straight-through estimator is ``soft + (hard - soft).detach()``: its value is ``hard``,
its gradient that of ``soft``. Written ``(hard - soft).detach() + hard`` (or ``hard + (hard -
soft).detach()``), the value is ``2 * hard - soft`` and the only gradient is that of ``hard``:
a one-hot made by ``scatter``/``one_hot`` of an ``argmax`` has none (the soft sample's logits
get no gradient, or the backward raises when nothing else requires grad), and a ``round`` /
``sign`` / ``floor`` has a zero gradient. The hard term is read where it is written or in the
value of the name's last assignment before the sum, when that expression (past casts such as
``.float()``/``.to(...)``) is an ``argmax``/``argmin``, ``one_hot``, ``scatter``, ``round``,
``sign``, ``floor`` or ``ceil`` call, or a comparison.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

HARD_OPS = frozenset({"argmax", "argmin", "one_hot", "scatter", "scatter_", "round", "sign",
                      "floor", "ceil"})
CASTS = frozenset({"float", "double", "half", "long", "int", "bool", "type", "type_as", "to"})


def _detached_difference(e: ast.AST) -> ast.BinOp | None:
    """``(a - b).detach()`` -> ``a - b``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "detach" and not e.args and not e.keywords \
            and isinstance(e.func.value, ast.BinOp) and isinstance(e.func.value.op, ast.Sub):
        return e.func.value
    return None


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a, annotate_fields=False) == ast.dump(b, annotate_fields=False)


def _hard_made(e: ast.AST, ctx: Context, line: int) -> ast.AST | None:
    """The expression that makes ``e`` a hard (non-differentiable) value, else None."""
    if isinstance(e, ast.Name):
        b = ctx.scope().binding_before(e.id, line)
        if b is None or b.value is None or not isinstance(b.stmt, ast.Assign):
            return None
        e = b.value
    top = e
    while isinstance(top, ast.Call) and isinstance(top.func, ast.Attribute) \
            and top.func.attr in CASTS:
        top = top.func.value  # `(x > 0).float()`, `F.one_hot(i, n).to(x.dtype)`
    if isinstance(top, ast.Compare) and not any(
            isinstance(o, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for o in top.ops):
        return e
    if isinstance(top, ast.Call):
        f = top.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in HARD_OPS:
            return e
    return None


class StraightThroughAddsHardValue(Rule):
    """A straight-through estimator adds back the hard value instead of the soft one.

    Why: `soft + (hard - soft).detach()` equals `hard` and has the gradient of `soft`.
    `(hard - soft).detach() + hard` equals `2 * hard - soft` (not the hard sample) and carries
    only the gradient of `hard`, which a one-hot of an `argmax`, a `round`, a `sign` or a
    comparison does not have (none, or zero): the logits behind `soft` never learn, silently,
    or the backward raises when nothing else in the loss requires grad (checked on torch 2.13;
    NOTE [straight-through term]). Add the detached difference to the soft value.
    Known limits: the sum is written in one expression; the hard term is a name bound to, or
    an expression of, an `argmax`/`one_hot`/`scatter`/`round`/`sign`/`floor`/`ceil` or a
    comparison.
    """

    code = "GT731"
    gate_statements = True
    name = "straight-through-adds-hard-value"
    message = ("`{expr}` adds the detached difference to `{hard}`, the hard value: it equals "
               "`2 * {hard} - {soft}` and its gradient is that of `{hard}` (none or zero); "
               "the straight-through form is `{soft} + ({hard} - {soft}).detach()`")
    triggers = ("detach",)
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def pick(logits):
                soft = F.softmax(logits, dim=-1)
                hard = F.one_hot(soft.argmax(-1), soft.shape[-1]).float()
                return (hard - soft).detach() + hard
            """, at=(7, 4)),
        Good("""
            import torch
            import torch.nn.functional as F

            def pick(logits):
                soft = F.softmax(logits, dim=-1)
                hard = F.one_hot(soft.argmax(-1), soft.shape[-1]).float()
                return (hard - soft).detach() + soft
            """),
        Good("""
            def lookahead(x, x_prev):
                return x + (x - x_prev).detach()
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        if not isinstance(node.op, ast.Add):
            return
        for d, other in ((node.left, node.right), (node.right, node.left)):
            diff = _detached_difference(d)
            if diff is None or not _same(diff.left, other) or _same(diff.right, other):
                continue
            made = _hard_made(other, ctx, node.lineno)
            if made is None:
                continue
            stmt = ctx.statement if ctx.statement is not None else node
            hard, soft = ctx.source(other), ctx.source(diff.right)
            related = [] if made is other else [Related(
                ctx.path, getattr(made, "lineno", node.lineno),
                f"`{hard}` is made here, without a gradient",
                ctx.column(made))]
            yield self.report(stmt, ctx, related=related, expr=ctx.source(node)[:60],
                              hard=hard, soft=soft)
            return
