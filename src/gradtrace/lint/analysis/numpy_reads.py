"""Names NumPy reads raw: values that cannot be on a graph.

# NOTE [read raw by NumPy]
NumPy turns a tensor into an array through ``Tensor.numpy()``, which raises for a tensor that
requires grad (``np.sum([r])``, ``np.mean``, ``np.array``: "Can't call numpy() on Tensor that
requires grad"; ``np.sum(r)`` of one such tensor raises a TypeError). So a name the function
hands uncut to one of NumPy's reductions or array builders, directly or through a list it is
appended to (``rwds.append(rwd)``, then ``np.sum(rwds)``), holds no graph there: a reward from
``env.step(act)`` summed for the log is a Python number, and the discounted returns built
from it (``torch.tensor([sum(disc[i:]) ...])``) lose nothing. Only a name with one binding
statement in the function is read so (every value it holds is made by that statement), and
only a read in an expression statement whose value nothing keeps (``print(np.sum(rwds))``,
``log.append(np.mean(rwds))``): a NumPy result bound or returned may be the loss's own cut
(``loss = np.mean(losses)``, GT103), where the tracer must see the value it reads as live.
A cut before NumPy (``np.sum(l.item())``) says nothing about the name: not a raw read.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import scope_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

# NumPy functions that convert every tensor they are handed through `Tensor.numpy()`
_CONVERTING = frozenset({
    "sum", "mean", "array", "asarray", "stack", "concatenate", "std", "var", "max", "min",
    "median", "cumsum", "prod", "hstack", "vstack", "average", "nansum", "nanmean",
})
_FILLS = ("append", "extend", "insert")


def read_by_numpy(ctx: Context, scope: Scope, name: str) -> bool:
    """``name`` is read raw by NumPy in ``scope`` and bound by one statement there
    (NOTE [read raw by NumPy])."""
    if not any(v == "numpy" or v.startswith("numpy.") for v in ctx.imports.aliases.values()):
        return False
    raw = ctx.memo("numpy-raw-reads", scope.node, lambda: _raw_reads(ctx, scope))
    if name not in raw:
        return False
    stmts = {id(b.stmt) for b in scope.bindings.get(name, ())}
    return len(stmts) == 1


def _raw_reads(ctx: Context, scope: Scope) -> frozenset[str]:
    direct: set[str] = set()
    for s in scope_nodes(scope.node):
        if not isinstance(s, ast.Expr):
            continue  # a read whose result is kept may be the cut itself (GT103's own case)
        for n in walk(s.value):
            if not (isinstance(n, ast.Call) and n.args):
                continue
            qual = ctx.qualified_name(n.func) or ""
            if qual.startswith("numpy.") and qual.count(".") == 1 \
                    and qual.rpartition(".")[2] in _CONVERTING:
                direct.update(_bare_names(n.args[0]))
    if not direct:
        return frozenset()
    out = set(direct)
    for mc in scope.method_calls:  # `rwds.append(rwd)`, `np.sum(rwds)`: `rwd` too
        if mc.receiver in direct and mc.method in _FILLS:
            for a in mc.call.args:
                out.update(_bare_names(a))
    return frozenset(out)


def _bare_names(e: ast.expr) -> list[str]:
    """The names ``e`` is made of without a call between (a list or tuple of them)."""
    if isinstance(e, ast.Name):
        return [e.id]
    if isinstance(e, (ast.List, ast.Tuple)):
        return [x for elt in e.elts for x in _bare_names(elt)]
    if isinstance(e, ast.Starred):
        return _bare_names(e.value)
    return []
