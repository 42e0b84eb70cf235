"""GT112: a sum of loss terms overwritten, before anything reads it, by some of its terms.

# NOTE [overwritten sum]
``total = a * wa + b * wb + c * wc`` then, in the same block with no read of ``total`` in
between, ``total = a``: the sum is dead, and whatever reads ``total`` afterwards (a
``backward()``, a ``return``) sees ``a`` alone; ``b`` and ``c`` reach no gradient (a leftover of
a debugging session). Said when the second value is a name that is a term of the sum (not
the name itself), and ``total`` is read after it in the block. Only a ``name = other_name`` statement that holds the
word "loss" is looked at (a cost gate); its block is read then.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.nodes import bfs_walk

BLOCKS = ("body", "orelse", "finalbody")
ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _names(e: ast.AST) -> set[str] | None:
    """The names an arithmetic expression of names, attributes, constants and calls on them
    combines (None: not such an expression)."""
    out: set[str] = set()
    for n in bfs_walk(e):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.BinOp) and not isinstance(n.op, ARITH):
            return None
        elif isinstance(n, (ast.Lambda, ast.comprehension, ast.NamedExpr)):
            return None
    return out


def _target(s: ast.stmt) -> str | None:
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
        return s.targets[0].id
    return None


def _reads(stmts: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for s in stmts for n in bfs_walk(s))


class LossSumOverwritten(Rule):
    """A sum of loss terms is overwritten by one of its terms before anything reads it.

    Why: `total = a * wa + b * wb` followed by `total = a` (a debugging leftover) throws the
    sum away: the `backward()` or `return` that reads `total` afterwards differentiates `a`
    alone, and the heads behind the other terms never receive a gradient, with no error
    (tom-roddick/oft#7). Delete the second assignment, or add the terms it drops.
    Known limits: both assignments must be to the same plain name in the same block, the
    first a sum of two or more terms, the second one of those terms alone (`total = a`, on
    one line); the name must be read afterwards in that block.
    """

    code = "GT112"
    name = "loss-sum-overwritten"
    message = ("`{stmt}` replaces the sum assigned on line {line} before anything reads it: "
               "what follows differentiates only {kept}, and {dropped} are dropped from the "
               "loss; delete this line or keep the other terms")
    triggers = ("loss",)
    gate_statements = True
    examples = [
        Bad("""
            import torch.nn.functional as F

            def compute_loss(pred, gt, w=(1.0, 1.0)):
                score_loss = F.binary_cross_entropy_with_logits(pred[0], gt[0])
                box_loss = F.l1_loss(pred[1], gt[1])
                total = score_loss * w[0] + box_loss * w[1]
                total = score_loss
                return total
            """, at=(7, 4)),
        Good("""
            import torch.nn.functional as F

            def compute_loss(pred, gt, w=(1.0, 1.0)):
                score_loss = F.binary_cross_entropy_with_logits(pred[0], gt[0])
                box_loss = F.l1_loss(pred[1], gt[1])
                total = score_loss * w[0] + box_loss * w[1]
                log = {"total": total.item()}
                total = score_loss
                return total, log
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        # (NOTE [overwritten sum]) gated on statements holding a trigger word; decided
        # without a walk for all but `name = other_name`, which is rare
        if len(node.targets) != 1 or not isinstance(node.value, ast.Name) or \
                not isinstance(node.targets[0], ast.Name) or \
                node.targets[0].id == node.value.id:
            return
        stmts = ctx.stmts
        got = _overwrite(node, stmts[-2] if len(stmts) > 1 else ctx.tree)
        if got is None:
            return
        first, used, kept, dropped = got
        yield self.report(node, ctx, related=(Related(
            ctx.path, first.lineno, "the sum of the terms is assigned here",
            ctx.column(first)),),
            stmt=ctx.source(node).strip(), line=first.lineno,
            kept=", ".join(f"`{x}`" for x in kept) or "part of it",
            dropped=", ".join(f"`{x}`" for x in dropped[:4]))


def _block_of(stmt: ast.AST, parent: ast.AST) -> list[ast.stmt] | None:
    for f in BLOCKS:
        body = getattr(parent, f, None)
        if body and any(x is stmt for x in body):
            return body
    for h in getattr(parent, "handlers", ()):
        if any(x is stmt for x in h.body):
            return h.body
    return None


def _overwrite(stmt: ast.AST, parent: ast.AST
               ) -> tuple[ast.stmt, set[str], list[str], list[str]] | None:
    """(the sum, its names, the kept term names, the dropped ones) when ``stmt`` (``total =
    a``) overwrites a sum assigned earlier in its block with no read in between."""
    name = _target(stmt)  # type: ignore[arg-type]
    value = getattr(stmt, "value", None)
    if name is None or not isinstance(value, ast.Name):
        return None
    body = _block_of(stmt, parent)
    if body is None:
        return None
    i = next(k for k, x in enumerate(body) if x is stmt)
    for j in range(i - 1, -1, -1):
        prev = body[j]
        if _target(prev) == name:
            v = prev.value  # type: ignore[attr-defined]
            if not (isinstance(v, ast.BinOp) and isinstance(v.op, (ast.Add, ast.Sub))):
                return None
            used = _names(v)
            terms = _term_names(v)
            if used is None or name in used or value.id not in terms or len(terms) < 2 \
                    or not _reads(body[i + 1:], name):
                return None
            return prev, used, [value.id], sorted(terms - {value.id})
        if _reads([prev], name) or isinstance(prev, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.ClassDef)):
            return None
    return None


def _term_names(e: ast.AST) -> set[str]:
    """The names that are whole terms or the first factor of a term (``a * wa`` -> ``a``)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _term_names(e.left) | _term_names(e.right)
    while isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Div)):
        e = e.left
    return {e.id} if isinstance(e, ast.Name) else set()
