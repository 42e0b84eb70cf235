"""A module class of the file whose ``forward`` reaches its input only as an index.

# NOTE [input reached only as an index]
A vector quantizer's ``forward(self, x)`` computes the distances of ``x`` to its codebook,
takes ``idx = torch.argmin(dist, dim=1)`` and returns ``self.codebook(idx)`` (reshaped): the
value returned is the codebook's rows, and ``x`` reaches it only through an integer index,
which has no gradient (pytorch-facts: integer tensors carry no ``grad_fn``). The module's output
is cut from its input even though it carries a graph (to the codebook's weight).
:func:`index_cut` reads it from the top-level statements of ``forward`` in order, tracking the
names that carry the input's graph and those that are an index of it (``argmax``/``argmin``,
as a function or a method, also through a ``.max(dim)[1]``) or a size (``x.shape``,
``x.size()``): a plain assignment carries the graph on when it reads a carrying name, makes
an index of it when its value is such a call, and carries nothing when it reads only indices
and sizes. Every ``return`` must give a value reading no carrying name and at least one index
(alone, or as the first element of a tuple); anything else that reads a carrying name (a
compound statement, a store into a subscript or attribute, an expression statement) gives
no fact. The common quantizer that returns ``x + (q - x).detach()`` (straight-through) reads
``x``: not cut.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

_INDEX_FUNCS = frozenset({"torch.argmin", "torch.argmax"})
_INDEX_METHODS = frozenset({"argmin", "argmax"})
_SIZE_ATTRS = frozenset({"shape", "ndim", "device", "dtype"})
_SIZE_METHODS = frozenset({"size", "dim"})


def index_cut(ctx: Context, cls: ClassInfo) -> ast.expr | None:
    """The index (``torch.argmin(...)``) through which alone the ``forward`` of ``cls``
    reaches its first input in every value it returns; None otherwise.
    NOTE [input reached only as an index]."""
    fwd = cls.methods.get("forward")
    if fwd is None or len(fwd.args.args) < 2:
        return None
    return ctx.memo("index-cut", fwd, lambda: _index_cut(ctx, fwd, fwd.args.args[1].arg))


def _index_cut(ctx: Context, fwd: ast.FunctionDef, param: str) -> ast.expr | None:
    live, index, sizes = {param}, set(), set()
    found: ast.expr | None = None
    returned = False
    for st in fwd.body:
        reads = _live_reads(st, live)
        before = set(live)
        if isinstance(st, ast.Assign):
            targets = {n.id for t in st.targets for n in walk(t) if isinstance(n, ast.Name)}
            if not all(isinstance(t, (ast.Name, ast.Tuple)) for t in st.targets):
                if reads:
                    return None
                continue
            live -= targets
            index -= targets
            sizes -= targets
            cut = _index_call(ctx, st.value)
            if cut is not None and _live_reads(cut, before):
                index |= targets
                found = found or cut
            elif _size_of(st.value, before):
                sizes |= targets
            elif reads:
                live |= targets
            continue
        if isinstance(st, ast.Return):
            v = st.value
            if isinstance(v, ast.Tuple) and v.elts:
                v = v.elts[0]
            if v is None or _live_reads(v, live) or not any(
                    isinstance(n, ast.Name) and n.id in index for n in walk(v)):
                return None
            returned = True
            continue
        if reads or isinstance(st, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            return None
    return found if returned else None


def _live_reads(e: ast.AST, live: set[str]) -> bool:
    """``e`` reads a carrying name other than for its size (``x.shape``, ``x.size(1)``)."""
    sized = {id(n.value) for n in walk(e) if isinstance(n, ast.Attribute) and (
        n.attr in _SIZE_ATTRS)} | {id(n.func.value) for n in walk(e) if isinstance(
            n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _SIZE_METHODS}
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in live
               and id(n) not in sized for n in walk(e))


def _size_of(v: ast.expr, live: set[str]) -> bool:
    """``x.shape``, ``x.size()``, ``x.shape[0]``: a size of a carrying name."""
    while isinstance(v, ast.Subscript):
        v = v.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
            and v.func.attr in _SIZE_METHODS:
        v = v.func
    return isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) \
        and v.value.id in live and v.attr in _SIZE_ATTRS | _SIZE_METHODS


def _index_call(ctx: Context, v: ast.expr) -> ast.expr | None:
    """``torch.argmin(d, dim=1)``, ``d.argmin(1)``, ``d.min(1)[1]``, ``d.max(dim=1).indices``:
    the index call, or None."""
    if isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant) \
            and v.slice.value == 1 or isinstance(v, ast.Attribute) and v.attr == "indices":
        inner = v.value
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                and inner.func.attr in ("min", "max") and (inner.args or inner.keywords):
            return inner
        return None
    if not isinstance(v, ast.Call):
        return None
    if isinstance(v.func, ast.Attribute) and v.func.attr in _INDEX_METHODS:
        return v
    return v if (ctx.qualified_name(v.func) or "") in _INDEX_FUNCS else None
