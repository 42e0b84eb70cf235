"""GT735: the VQ-VAE codebook and commitment terms with the weight on the wrong one.

# NOTE [vq loss terms]
A vector-quantisation layer learns with two squared distances between the encoder output
``e`` and its quantised value ``q`` (van den Oord et al.): ``(q - e.detach())^2`` moves only
the codebook (weight 1) and ``(q.detach() - e)^2`` moves only the encoder, the *commitment*
term, weighted by ``beta`` (0.25). Which name is the encoder output is read from the code, not
the names: the layer's straight-through line ``e + (q - e).detach()`` in the same function gives
the gradient to ``e``. A weight on the codebook term with none on the commitment term is the
swap (taming-transformers keeps it as ``legacy=True``): the codebook learns ``beta`` times
slower and the encoder is pulled ``1/beta`` times harder to the codes, silently.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.excerpt import excerpt

SQUARES = frozenset({"mse_loss"})


def _side(e: ast.expr) -> tuple[str, bool] | None:
    """(name, detached) for ``n`` or ``n.detach()``."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "detach" and not e.args:
        return (e.func.value.id, True) if isinstance(e.func.value, ast.Name) else None
    return (e.id, False) if isinstance(e, ast.Name) else None


def _pair(a: ast.expr, b: ast.expr) -> frozenset[tuple[str, bool]] | None:
    sa, sb = _side(a), _side(b)
    if sa is None or sb is None or sa[0] == sb[0] or sa[1] == sb[1]:
        return None  # two names, exactly one detached
    return frozenset((sa, sb))


def _square_term(e: ast.expr) -> frozenset[tuple[str, bool]] | None:
    """The two sides of ``mse_loss(a, b)``, ``((a - b) ** 2).mean()``,
    ``(a - b).pow(2).mean()``, ``torch.mean((a - b) ** 2)``."""
    if isinstance(e, ast.Call) and e.args and (
            getattr(e.func, "attr", None) in SQUARES or getattr(e.func, "id", None) in SQUARES) \
            and len(e.args) >= 2:
        return _pair(e.args[0], e.args[1])
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in ("mean", "sum"):
        # `torch.mean(d ** 2)` (a function of the module) or `(d ** 2).mean()`
        inner = e.args[0] if e.args and isinstance(e.func.value, ast.Name) else e.func.value
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Pow) \
                and isinstance(inner.right, ast.Constant) and inner.right.value == 2:
            inner = inner.left
        elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                and inner.func.attr == "pow" and len(inner.args) == 1 \
                and isinstance(inner.args[0], ast.Constant) and inner.args[0].value == 2:
            inner = inner.func.value
        else:
            return None
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
            return _pair(inner.left, inner.right)
    return None


Weighted = tuple[ast.expr | None, frozenset[tuple[str, bool]], ast.expr]


def _weighted(e: ast.expr) -> Weighted | None:
    """(weight or None, sides, term) for ``term`` or ``w * term`` / ``term * w``."""
    t = _square_term(e)
    if t is not None:
        return None, t, e
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
        for term, w in ((e.right, e.left), (e.left, e.right)):
            t = _square_term(term)
            if t is not None and _square_term(w) is None:
                return w, t, term
    return None


def _straight_through(ctx: Context, enc: str, quant: str) -> ast.stmt | None:
    """The statement ``... = enc + (quant - enc).detach()`` in the current function."""
    for s in ctx.scope().stmts:
        v = getattr(s, "value", None)
        if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add)):
            continue
        for a, d in ((v.left, v.right), (v.right, v.left)):
            if isinstance(a, ast.Name) and a.id == enc and isinstance(d, ast.Call) \
                    and isinstance(d.func, ast.Attribute) and d.func.attr == "detach" \
                    and isinstance(d.func.value, ast.BinOp) \
                    and isinstance(d.func.value.op, ast.Sub) \
                    and isinstance(d.func.value.left, ast.Name) and d.func.value.left.id == quant \
                    and isinstance(d.func.value.right, ast.Name) and d.func.value.right.id == enc:
                return s
    return None


def _pair_of(v: object) -> tuple[Weighted, Weighted] | None:
    """(weighted, plain) terms of ``a + b`` when exactly one of the two is weighted."""
    if not (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add)):
        return None
    left, right = _weighted(v.left), _weighted(v.right)
    if left is None or right is None or left[1] == right[1] or \
            {n for n, _ in left[1]} != {n for n, _ in right[1]} or \
            (left[0] is None) == (right[0] is None):
        return None
    return (left, right) if left[0] is not None else (right, left)


def _other_arm_weighs(ctx: Context, sides: frozenset[tuple[str, bool]]) -> bool:
    """The statement sits in one arm of an ``if`` whose other arm sums the same two terms
    with the weight on the other one (``if not self.legacy: ... else: ...``): both orders
    are written, one chosen by a flag on purpose (a compatibility switch), not a slip."""
    if len(ctx.stmts) < 2 or not isinstance(ctx.stmts[-2], ast.If):
        return False
    branch = ctx.stmts[-2]
    arm = branch.orelse if ctx.statement in branch.body else branch.body
    for s in arm:
        got = _pair_of(getattr(s, "value", None))
        if got is not None and got[0][1] != sides and \
                {n for n, _ in got[0][1]} == {n for n, _ in sides}:
            return True
    return False


class VqCommitmentWeightSwapped(Rule):
    """A VQ-VAE latent loss puts the commitment weight on the codebook term.

    Why: in `(q.detach() - e)^2 + beta * (q - e.detach())^2`, with `e` the encoder output and
    `q` its code (the layer's straight-through line `e + (q - e).detach()` says which is which),
    the first term only moves the encoder and the second only moves the codebook: the weight
    `beta` (0.25) meant for the commitment term slows the codebook and the encoder is pulled to
    the codes four times harder. Nothing raises; the codebook lags the encoder
    (NOTE [vq loss terms]). Weight the term whose encoder side is live:
    `beta * (q.detach() - e)^2 + (q - e.detach())^2`.
    Known limits: the two terms are summed in one expression over two local names, each a
    `mse_loss` or a mean/sum of a squared difference; the straight-through line is in the same
    function. Silent when the other arm of the `if` holding the sum writes the other order (a
    flag chooses between them on purpose).
    """

    code = "GT735"
    gate_statements = True
    name = "vq-commitment-weight-swapped"
    message = ("`{weight}` weights `{codebook}`, the codebook term (`{enc}` detached: only the "
               "codebook learns from it), and the commitment term `{commit}` has weight 1: the "
               "codebook learns `{weight}` times slower and the encoder output is pulled to the "
               "codes harder; put `{weight}` on `{commit}`")
    triggers = ("detach",)
    examples = [
        Bad("""
            import torch.nn.functional as F

            def quantize(z, codebook, beta=0.25):
                idx = torch.cdist(z, codebook).argmin(-1)
                zq = codebook[idx]
                loss = F.mse_loss(zq.detach(), z) + beta * F.mse_loss(zq, z.detach())
                zq = z + (zq - z).detach()
                return zq, loss
            """, at=(6, 4)),
        Good("""
            import torch.nn.functional as F

            def quantize(z, codebook, beta=0.25):
                idx = torch.cdist(z, codebook).argmin(-1)
                zq = codebook[idx]
                loss = beta * F.mse_loss(zq.detach(), z) + F.mse_loss(zq, z.detach())
                zq = z + (zq - z).detach()
                return zq, loss
            """),
        Good("""
            def quantize(z, codebook, beta=0.25, legacy=False):
                zq = codebook[torch.cdist(z, codebook).argmin(-1)]
                if legacy:  # both orders written: a compatibility switch
                    loss = ((zq.detach() - z) ** 2).mean() + beta * ((zq - z.detach()) ** 2).mean()
                else:
                    loss = beta * ((zq.detach() - z) ** 2).mean() + ((zq - z.detach()) ** 2).mean()
                return z + (zq - z).detach(), loss
            """),
    ]

    def visit_BinOp(self, node: ast.BinOp, ctx: Context) -> Iterator[Finding]:
        got = _pair_of(node)
        if got is None:
            return
        weighted, plain = got
        # the weighted term's detached side is the encoder output when the straight-through
        # line gives the gradient to it
        enc = next(n for n, d in weighted[1] if d)
        quant = next(n for n, d in weighted[1] if not d)
        st = _straight_through(ctx, enc, quant)
        if st is None:
            return
        if _other_arm_weighs(ctx, weighted[1]):
            return
        stmt = ctx.statement if ctx.statement is not None else node
        yield self.report(stmt, ctx, related=[Related(
            ctx.path, st.lineno, f"the straight-through line gives the gradient to `{enc}`: "
            "it is the encoder output", ctx.column(st))],
            weight=excerpt(ctx.source(weighted[0])), codebook=excerpt(ctx.source(weighted[2])),
            enc=enc, commit=excerpt(ctx.source(plain[2])))
