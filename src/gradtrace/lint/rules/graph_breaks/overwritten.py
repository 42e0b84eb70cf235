"""GT112: a sum of loss terms overwritten, before anything reads it, by some of its terms.

# NOTE [overwritten sum]
``total = a * wa + b * wb + c * wc`` then, in the same block with no read of ``total`` in
between, ``total = a``: the sum is dead, and whatever reads ``total`` afterwards (a
``backward()``, a ``return``) sees ``a`` alone; ``b`` and ``c`` reach no gradient (a leftover of
a debugging session; open-mmlab style detection losses). Said when the second value uses a
strict subset of the names the first one combines (and not the name itself), and ``total`` is
read after it.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

BLOCKS = ("body", "orelse", "finalbody")
ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _names(e: ast.AST) -> set[str] | None:
    """The names an arithmetic expression of names, attributes, constants and calls on them
    combines (None: not such an expression)."""
    out: set[str] = set()
    for n in ast.walk(e):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.BinOp) and not isinstance(n.op, ARITH):
            return None
        elif isinstance(n, (ast.Lambda, ast.comprehension, ast.NamedExpr)):
            return None
    return out


def _terms(e: ast.AST) -> int:
    """The number of terms of a sum (``a + b * w - c``: 3)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _terms(e.left) + _terms(e.right)
    return 1


def _target(s: ast.stmt) -> str | None:
    if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
        return s.targets[0].id
    return None


def _reads(stmts: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for s in stmts for n in ast.walk(s))


def _blocks(fn: ast.AST) -> Iterator[list[ast.stmt]]:
    """The statement lists of a function (or module), nested defs and classes excluded."""
    todo = [getattr(fn, "body", [])]
    while todo:
        body = todo.pop()
        yield body
        for s in body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for f in BLOCKS:
                sub = getattr(s, f, None)
                if sub:
                    todo.append(sub)
            for h in getattr(s, "handlers", ()):
                todo.append(h.body)


class LossSumOverwritten(Rule):
    """A sum of loss terms is overwritten by one of its terms before anything reads it.

    Why: `total = a * wa + b * wb` followed by `total = a` (a debugging leftover) throws the
    sum away: the `backward()` or `return` that reads `total` afterwards differentiates `a`
    alone, and the heads behind the other terms never receive a gradient, with no error
    (tom-roddick/oft#7). Delete the second assignment, or add the terms it drops.
    Known limits: both assignments must be to the same plain name in the same block, the
    first a sum of two or more terms, the second an expression of a strict subset of its
    names; the name must be read afterwards.
    """

    code = "GT112"
    name = "loss-sum-overwritten"
    message = ("`{stmt}` replaces the sum assigned on line {line} before anything reads it: "
               "what follows differentiates only {kept}, and {dropped} are dropped from the "
               "loss; delete this line or keep the other terms")
    triggers = ("loss", ".backward(")
    gate_statements = "function"
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

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._scan(node, ctx)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef,
                               ctx: Context) -> Iterator[Finding]:
        yield from self._scan(node, ctx)

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        yield from self._scan(node, ctx)

    def _scan(self, fn: ast.AST, ctx: Context) -> Iterator[Finding]:
        for body in _blocks(fn):
            sums: dict[str, tuple[int, set[str], int, set[str]]] = {}
            for i, s in enumerate(body):
                name = _target(s)
                if name is None:
                    continue
                value = s.value  # type: ignore[attr-defined]
                got = sums.get(name)
                used = _names(value)
                if got is not None and used is not None and name not in used and used \
                        and used < got[1] and not _reads(body[got[0] + 1:i], name) \
                        and _reads(body[i + 1:], name) and \
                        (isinstance(value, ast.Name) or _terms(value) < got[2]):
                    first = body[got[0]]
                    dropped = sorted(got[3] - used)
                    yield self.report(s, ctx, related=(Related(
                        ctx.path, first.lineno, "the sum of the terms is assigned here",
                        ctx.column(first)),),
                        stmt=ctx.source(s).strip(), line=first.lineno,
                        kept=", ".join(f"`{x}`" for x in sorted(used & got[3])) or "part of it",
                        dropped=", ".join(f"`{x}`" for x in dropped[:4]))
                if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub)) \
                        and _terms(value) >= 2 and used is not None and name not in used:
                    terms = _term_names(value)
                    sums[name] = (i, used, _terms(value), terms)
                else:
                    sums.pop(name, None)


def _term_names(e: ast.AST) -> set[str]:
    """The names that are whole terms or the first factor of a term (``a * wa`` -> ``a``)."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
        return _term_names(e.left) | _term_names(e.right)
    while isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Mult, ast.Div)):
        e = e.left
    return {e.id} if isinstance(e, ast.Name) else set()
