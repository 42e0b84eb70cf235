"""Parameters a module class registers in ``__init__`` and what its ``forward`` does to them.

# NOTE [trained parameter attributes]
``self.weight = nn.Parameter(...)`` in ``__init__`` makes ``self.weight`` a leaf that requires
grad for the module's whole life, read in every method. ``forward`` (and the methods it calls
through ``self``) runs with grad enabled in a file that trains (calls ``backward()``), so an
in-place write there (``self.weight /= self.weight.norm(...)``, ``self.scale.clamp_(...)``,
``self.mem[0] = ...``) is refused by autograd on the first call. The attribute must be
assigned once (in ``__init__``, its kind a Parameter through the analysis layer: NOTE [kinds]),
not made with ``requires_grad=False``, and the file must freeze nothing (no
``x.requires_grad = False``, no ``requires_grad_(False)``): a frozen parameter takes in-place
writes. Grad-mode blocks and decorators inside the method are the rule's to check.

# NOTE [parameters read only cut]
Such a Parameter that the class's methods read only through ``.data`` or ``.detach()``
(``torch.matmul(X, self.weight.data)``) is in no graph: it never gets a gradient, and a loss
built only from such modules has no ``grad_fn``. A class that also reads it live anywhere
(``self.weight.data.norm()`` logged next to ``x @ self.weight``), or updates it by hand (an
in-place op, a write through ``.data``, a rebinding: an EMA codebook), means the cut; reads of
its shape, dtype or device read no values.
"""
from __future__ import annotations

import ast
import weakref
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.calls import call_sites
from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


_FORWARD: weakref.WeakKeyDictionary[ClassInfo, list[Fn]] = weakref.WeakKeyDictionary()


def forward_methods(cls: ClassInfo) -> list[Fn]:
    """``forward`` and the methods it calls through ``self``, transitively (not
    ``__init__``); found once per class, several rules ask."""
    got = _FORWARD.get(cls)
    if got is None:
        out: list[Fn] = []
        todo, seen = ["forward"], set()
        while todo:
            m = cls.methods.get(todo.pop())
            if m is None or m.name in seen or m.name == "__init__":
                continue
            seen.add(m.name)
            out.append(m)
            todo.extend(n.func.attr for n in of_types(m, (ast.Call,))
                        if isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self")
        got = _FORWARD[cls] = out
    return list(got)


def trained_parameter(ctx: Context, cls: ClassInfo, attr: str) -> ast.stmt | None:
    """The ``__init__`` statement that makes ``self.<attr>`` a Parameter that requires grad
    for good (NOTE [trained parameter attributes]); None: not known to be one."""
    info = cls.attrs.get(attr)
    if info is None or info.later or info.buffer or info.method.name != "__init__":
        return None
    k = cls.attr_kind(attr)
    if k is None or k.what != PARAMETER or asks_no_grad(info.value):
        return None
    if file_freezes(ctx) or not call_sites(ctx, "backward"):
        return None
    return info.stmt


def asks_no_grad(v: ast.expr | None) -> bool:
    return isinstance(v, ast.Call) and any(
        k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant)
                                          and k.value.value is True) for k in v.keywords)


def file_freezes(ctx: Context) -> bool:
    """The file sets ``requires_grad`` to anything but True somewhere (a freeze)."""
    def make() -> bool:
        for n in walk(ctx.tree):
            if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    for t in n.targets) and not _true(n.value):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_" and n.args and not _true(n.args[0]):
                return True
        return False
    # both writes name `requires_grad` (the attribute, `requires_grad_`) in the code
    return ctx.mentions("requires_grad") and ctx.memo("file-freezes", ctx.tree, make)


def _true(e: ast.expr) -> bool:
    return isinstance(e, ast.Constant) and e.value is True


# tensor attributes and methods that read no values (shape, dtype, device)
_SHAPE_READS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "size", "dim",
                          "numel", "requires_grad", "grad", "nelement", "is_leaf"})
_CUT_CALLS = frozenset({"detach"})


def only_cut_reads(ctx: Context, cls: ClassInfo, attr: str) -> ast.AST | None:
    """The first read of ``self.<attr>`` in ``forward``'s methods when every read of it in
    the class's methods (``__init__`` aside) cuts its history (``self.w.data``,
    ``self.w.detach()``) and nothing updates it by hand (an in-place op, a write through
    ``.data``, a rebinding: an EMA codebook, a weight kept by a schedule); None otherwise
    (NOTE [parameters read only cut])."""
    first: ast.AST | None = None
    fwd = {id(m) for m in forward_methods(cls)}
    for m in cls.methods.values():
        if m.name == "__init__":
            continue
        parents: dict[int, ast.AST] = {}
        for n in walk(m):
            for c in ast.iter_child_nodes(n):
                parents[id(c)] = n
        for n in walk(m):
            if not (isinstance(n, ast.Attribute) and n.attr == attr
                    and isinstance(n.value, ast.Name) and n.value.id == "self"):
                continue
            how, cut = read_kind(n, parents)
            if how == "live" or how == "kept":
                return None
            if how == "cut" and id(m) in fwd and (first is None or (
                    cut.lineno, cut.col_offset) < (first.lineno, first.col_offset)):
                first = cut
    return first


def read_kind(n: ast.Attribute, parents: dict[int, ast.AST]) -> tuple[str, ast.AST]:
    """How one ``<obj>.<attr>`` node uses the tensor, and the expression doing it: "cut"
    (a ``.data`` read, ``.detach()``), "shape" (no values), "kept" (written or updated in
    place), "live" (anything else)."""
    if not isinstance(n.ctx, ast.Load):
        return "kept", n
    p = parents.get(id(n))
    if not (isinstance(p, ast.Attribute) and p.value is n):
        return "live", n
    g = parents.get(id(p))
    if p.attr in _SHAPE_READS:
        return "shape", p
    if p.attr in _CUT_CALLS and isinstance(g, ast.Call) and g.func is p:
        return "cut", g
    if p.attr.endswith("_") and isinstance(g, ast.Call) and g.func is p:
        return "kept", g
    if p.attr != "data":
        return "live", n
    if not isinstance(p.ctx, ast.Load):
        return "kept", p  # `self.w.data = ...`
    cut, e = p, p
    while isinstance(g, ast.Subscript) and g.value is e:  # `self.w.data[i] = ...`
        if not isinstance(g.ctx, ast.Load):
            return "kept", g
        e, g = g, parents.get(id(g))
    if isinstance(g, ast.Attribute) and g.value is e and g.attr.endswith("_"):
        return "kept", g  # `self.w.data.mul_(...)`
    if isinstance(g, ast.AugAssign) and g.target is e:
        return "kept", g
    return "cut", cut
