"""``x.grad`` read in a file whose backward passes build no graph.

# NOTE [gradient without a graph]
``cost.backward()`` fills ``_adv.grad`` with a tensor that has no ``grad_fn`` (verified on torch
2.13: ``x.grad.requires_grad`` is False); only a backward run with ``create_graph=True`` leaves
a gradient that carries a graph. So a ``.grad`` read is a value without history, as a ``.shape``
is, when the file never spells ``create_graph`` (no ``backward``/``autograd.backward`` of it can
keep the graph) and never assigns a ``.grad`` (``p.grad = g`` may store any tensor). A PGD
attack's ``grad = _adv.grad`` then ``grad / (torch.sqrt((grad * grad).sum()) + eps)``: nothing
differentiates the root. One look at the file's text.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_GRAD_STORE_RE = re.compile(r"\.grad\s*(?:=(?!=)|\+=|-=|\*=|/=)|setattr\(")


def filled_without_graph(ctx: Context) -> bool:
    """Every ``.grad`` the file reads holds no graph (NOTE [gradient without a graph])."""
    return ctx.memo("filled-grads", ctx.tree, lambda: "create_graph" not in ctx.code
                    and _GRAD_STORE_RE.search(ctx.code) is None)
