"""GT621: ``detach_()`` on a view."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.sure_views import sure_view
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule


class DetachInPlaceOnView(Rule):
    """`t.detach_()` where `t` is a view of another tensor: a `view`/`transpose`/`unsqueeze`/
    `expand`..., a basic index (`x[0]`), a piece of `split`/`chunk`, a `reshape` of a tensor
    that `torch.stack`/`torch.cat`/a factory just made, or what a function of the file
    returns when every `return` of it is one.

    Why: PyTorch cannot detach a view in place, whatever its base and with grad on or off:
    `RuntimeError: Can't detach views in-place. Use detach() instead.` (NOTE [sure views];
    checked on torch 2.13). invariant-point-attention#9: `rotations = quaternion_to_matrix(q)`
    (pytorch3d's ends with `o.reshape(...)` of a `torch.stack`), then `rotations.detach_()`
    fails in the first forward. Rebind instead: `t = t.detach()`.
    Known limits: only values that are views on every path (NOTE [sure views]): a `reshape`
    of any other tensor, `flatten`, an index by a tensor, a function's parameter and an
    attribute are not followed.
    """

    code = "GT621"
    name = "detach-in-place-on-view"
    message = ("`{value}` is a view ({how}), and a view cannot be detached in place: "
               "`{call}` raises 'Can't detach views in-place'; rebind it with `.detach()` "
               "instead")
    triggers = ("detach_(",)
    examples = [
        Bad("""
            import torch
            def to_matrix(q):
                o = torch.stack((q, q, q, q, q, q, q, q, q), -1)
                return o.reshape(q.shape + (3, 3))
            rot = to_matrix(torch.randn(4))
            rot.detach_()
            """, at=(6, 0)),
        Bad("""
            import torch
            out = encoder(x)
            feats = out.transpose(1, 2)
            feats.detach_()
            """, at=(4, 0)),
        Good("""
            import torch
            def to_matrix(q):
                o = torch.stack((q, q, q, q, q, q, q, q, q), -1)
                return o.reshape(q.shape + (3, 3))
            rot = to_matrix(torch.randn(4))
            rot = rot.detach()
            """),
        Good("""
            import torch
            h = torch.zeros(2, 8)
            h = rnn_cell(x, h)
            h.detach_()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "detach_") or node.args \
                or node.keywords:
            return
        fn = ctx.scope().node
        if not sure_view(f.value, fn, ctx):
            return
        yield self.report(ctx.statement or node, ctx, value=ctx.source(f.value),
                          how=_how(f.value, fn, ctx), call=ctx.source(node))


def _how(e: ast.AST, fn: ast.AST, ctx: Context) -> str:
    """Where the view comes from, for the message."""
    if isinstance(e, ast.Name):
        b = ctx.scope(fn).binding_before(e.id, 10 ** 9)
        if b is not None and b.value is not None:
            return f"`{ctx.source(b.value)}`, line {b.line}"
    return f"`{ctx.source(e)}`"
