"""GT105 on a layer's Parameter: ``self.fc.weight.data`` in a value ``forward`` returns.

# NOTE [layer parameter read through data]
``att = self.fc.weight.data[query]`` in ``forward``, ``att`` flowing into what ``forward``
returns through arithmetic: ``self.fc.weight`` is a Parameter of a ``torch.nn`` layer
(NOTE [layer parameter views]) and ``.data`` hands its values without the graph, so that path gives
the weight no gradient, even when the layer is also called live elsewhere (OpenNRE's bag
attention: the relation matrix learns through the classifier only, not through the attention
query). Left alone: a value only compared or turned into indices (a nearest-codeword search),
a file that freezes parameters or writes such a weight by hand (``.weight.data.copy_``, an
EMA), grad-off code, and a value returned beside the loss ``forward`` computes itself without
it (NOTE [own loss element]: CRSLab's GRU4Rec scores, which its systems only rank).
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.lint.analysis.layer_params import layer_parameter
from gradtrace.lint.analysis.own_loss import beside_own_loss
from gradtrace.lint.analysis.param_attrs import file_freezes
from gradtrace.lint.analysis.selectors import INDEX_OPS, only_selects
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.rules.graph_breaks._data_uses import _meta, _parents
from gradtrace.lint.rules.graph_breaks._layer_source import returned_assigns


def parameter_data_reads(fn: ast.AST, ctx) -> Iterator[tuple[ast.Attribute, ast.stmt, ast.AST]]:
    """(the ``.data`` node, its statement, the layer's construction) for each read of a
    ``torch.nn`` layer's Parameter through ``.data`` in a value ``forward`` returns."""
    if file_freezes(ctx):
        return
    scope = ctx.scope(fn)
    for s in returned_assigns(scope):
        parents = None
        for n in walk(s.value):
            if not (isinstance(n, ast.Attribute) and n.attr == "data"
                    and isinstance(n.value, ast.Attribute)):
                continue
            layer = layer_parameter(ctx, fn, n.value, s.lineno)
            if layer is None or _written(ctx, n.value):
                continue
            parents = parents or _parents(s)
            if _meta(n, parents) or only_selects(scope, n) or only_selects(scope, s.value) \
                    or _chooses(n, parents):
                continue
            if beside_own_loss(ctx, fn, s.targets[0].id):
                break  # NOTE [own loss element]: the forward's loss does not take this path
            yield n, s, layer


def _chooses(n: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """On the way up from ``n`` its statement turns it into indices or booleans
    (``torch.cdist(f, self.emb.weight.data).argmin(1)``, ``w.data > t``)."""
    p = parents.get(id(n))
    while p is not None:
        if isinstance(p, ast.Compare) or isinstance(p, ast.Call) and isinstance(
                p.func, ast.Attribute) and p.func.attr in INDEX_OPS:
            return True
        p = parents.get(id(p))
    return False


def _written(ctx, param: ast.Attribute) -> bool:
    """The file writes a Parameter of that name by hand somewhere: assigns ``<x>.weight`` or
    ``<x>.weight.data``, or calls an in-place method on ``<x>.weight`` or its ``.data``."""
    attr = param.attr
    memo = ctx.memo("gt105-written-params", ctx.tree, dict)
    if attr not in memo:
        memo[attr] = any(_writes(r, attr) for r in _update_code(ctx.tree))
    return memo[attr]


def _update_code(tree: ast.AST) -> Iterator[ast.AST]:
    """Where a hand update of a weight would run every step: the file's loops and its
    functions, but for one-off initialisation (``__init__``, ``init_weights``,
    ``reset_parameters``: a weight scaled or copied once is still trained)."""
    todo = list(getattr(tree, "body", []))
    while todo:
        s = todo.pop()
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            low = s.name.lower()
            if "init" not in low and "reset" not in low:
                yield s
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            yield s
        else:
            for f in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(x for x in getattr(s, f, None) or [] if isinstance(x, ast.AST))


def _writes(tree: ast.AST, attr: str) -> bool:
    for n in walk(tree):
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                while isinstance(t, (ast.Subscript, ast.Attribute)) and not (
                        isinstance(t, ast.Attribute) and t.attr == attr):
                    t = t.value
                if isinstance(t, ast.Attribute) and t.attr == attr \
                        and dotted(t.value) not in (None, "self"):
                    return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr.endswith("_") and not n.func.attr.startswith("_"):
            r = n.func.value
            if isinstance(r, ast.Attribute) and r.attr == "data":
                r = r.value
            if isinstance(r, ast.Attribute) and r.attr == attr:
                return True
    return False
