"""GT126: a quantizer's index lookup decoded into a loss without the straight-through copy."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cuts import is_functional_loss
from gradtrace.lint.analysis.index_lookup import index_cut
from gradtrace.lint.analysis.kinds import MODULE, is_torch_loss
from gradtrace.lint.analysis.param_attrs import file_freezes
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.graph_breaks._base import short


_VQ = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Quantizer(nn.Module):
        def __init__(self, n, d):
            super().__init__()
            self.codes = nn.Embedding(n, d)

        def forward(self, z):
            dist = torch.cdist(z, self.codes.weight)
            idx = torch.argmin(dist, dim=1)
            return self.codes(idx)

    class VQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(8, 4)
            self.quant = Quantizer(16, 4)
            self.dec = nn.Linear(4, 8)

        def loss(self, x):
            z = self.enc(x)
            q = self.quant(z)
            {commit}
            recon = self.dec(q)
            return F.mse_loss(recon, x) + commit
    """


class DecodedWithoutStraightThrough(Rule):
    """A function decodes the output of a quantizer module of the file, whose `forward`
    reaches its input only through an index (`idx = torch.argmin(dist, 1)`, then
    `return self.codebook(idx)`), into a loss, without the straight-through copy
    `q = z + (q - z).detach()` of the quantizer's input `z` first.

    Why: an integer index has no gradient, so the quantizer's output is cut from its input:
    the loss of what is decoded from it (the reconstruction) trains the decoder and the
    codebook but gives the encoder that produced `z` no gradient; the encoder learns only
    from the other terms (a commitment term), and nothing raises (the VQ-VAE straight-through
    estimator exists for this; KimRass/VQ-VAE-PixelCNN 769435a). Rebind the quantized value
    as `q = z + (q - z).detach()` before decoding, or return it from the quantizer's
    `forward`. A quantizer whose `forward` already returns the straight-through value reads
    its input there and is not such a module (NOTE [input reached only as an index]).
    Known limits: the quantizer's class and the decoding function must be in one file; a
    file that freezes anything is left alone (a frozen, pre-trained encoder).
    """

    code = "GT126"
    name = "decoded-without-straight-through"
    message = ("`{expr}` decodes `{q}`, the output of `{quant}` that reaches `{z}` only "
               "through an index, into the loss: the encoder that produced `{z}` gets no "
               "gradient from this term; decode `{z} + ({q} - {z}).detach()` instead")
    triggers = ("argmin", "argmax")
    examples = [
        Bad(_VQ.format(commit="commit = F.mse_loss(z, q.detach())"), at=(26, 16)),
        Good(_VQ.format(commit="commit, q = F.mse_loss(z, q.detach()), z + (q - z).detach()")),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        quants = {c.name: cut for c in ctx.analysis.classes.values()
                  if c.is_module and (cut := index_cut(ctx, c)) is not None}
        if not quants or file_freezes(ctx):
            return
        fns = [*ctx.analysis.functions.values(),
               *(m for c in ctx.analysis.classes.values() for m in c.methods.values())]
        for fn in (ctx.tree, *fns):
            if fn is ctx.tree or isinstance(fn, FUNCTION_TYPES):
                yield from self._decoded(fn, quants, ctx)

    def _decoded(self, fn: ast.AST, quants: dict[str, ast.expr], ctx: Context
                 ) -> Iterator[Finding]:
        scope = ctx.scope(fn)
        body = sorted((s for s in scope_nodes(fn) if isinstance(s, ast.Assign)),
                      key=lambda s: (s.lineno, s.col_offset))
        for st in body:
            c = st.value
            if not (len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                    and isinstance(c, ast.Call) and len(c.args) == 1) \
                    or scope.grad_off_at(st) is not None:
                continue
            k = ctx.analysis.kind_in(c.func, fn, st.lineno)
            if k is None or k.what != MODULE or k.cls not in quants \
                    or not _module_output(c.args[0], fn, st.lineno, ctx):
                continue
            q = st.targets[0].id
            dec = _decoder_call(fn, q, st, body, quants, ctx)
            if dec is not None and _reaches_loss(dec, body, ctx, fn):
                z = ctx.source(c.args[0])
                cut = quants[k.cls]  # type: ignore[index]
                yield self.report(dec, ctx, related=[Related(
                    ctx.path, cut.lineno, "the quantizer reaches its input only through "
                    "this index", ctx.column(cut))], expr=short(ctx.source(dec)), q=q,
                    quant=short(ctx.source(c.func)), z=short(z))


def _module_output(e: ast.expr, fn: ast.AST, line: int, ctx: Context) -> bool:
    """``e`` is a call of a module (``self.enc(x)``) or a name bound once to one."""
    if isinstance(e, ast.Name):
        bs = ctx.scope(fn).bindings_before(e.id, line)
        if len(bs) != 1 or bs[0].value is None:
            return False
        e, line = bs[0].value, bs[0].line
    if not isinstance(e, ast.Call):
        return False
    k = ctx.analysis.kind_in(e.func, fn, line)
    return k is not None and k.what == MODULE


def _decoder_call(fn: ast.AST, q: str, st: ast.Assign, body: list[ast.Assign],
                  quants: dict[str, ast.expr], ctx: Context) -> ast.Call | None:
    """The first call of another module given ``q`` itself after ``st``, before ``q`` is
    rebound (the straight-through copy, or anything else)."""
    end = min((s.lineno for s in body if s.lineno > st.lineno and any(
        isinstance(n, ast.Name) and n.id == q for t in s.targets for n in walk(t))),
        default=10 ** 9)
    for n in scope_nodes(fn):
        if isinstance(n, ast.Call) and st.lineno < n.lineno < end and any(
                isinstance(a, ast.Name) and a.id == q for a in n.args):
            k = ctx.analysis.kind_in(n.func, fn, n.lineno)
            if k is not None and k.what == MODULE and k.cls not in quants \
                    and not is_torch_loss(k.cls):
                return n
    return None


def _reaches_loss(dec: ast.Call, body: list[ast.Assign], ctx: Context, fn: ast.AST) -> bool:
    """What ``dec`` returns flows, through names of ``fn``, into a torch loss (a
    functional loss or a ``torch.nn`` loss module)."""
    carry: set[str] = set()
    for s in body:
        if s.lineno >= dec.lineno and (any(n is dec for n in walk(s.value)) or any(
                isinstance(n, ast.Name) and n.id in carry for n in walk(s.value))):
            carry |= {n.id for t in s.targets for n in walk(t) if isinstance(n, ast.Name)}
    for n in scope_nodes(fn):
        if not isinstance(n, ast.Call) or n.lineno < dec.lineno:
            continue
        k = ctx.analysis.kind_in(n.func, fn, n.lineno)
        if not (is_functional_loss(ctx.qualified_name(n.func) or "")
                or k is not None and k.what == MODULE and is_torch_loss(k.cls)):
            continue
        if any(x is dec or isinstance(x, ast.Name) and x.id in carry
               for a in n.args for x in walk(a)):
            return True
    return False
