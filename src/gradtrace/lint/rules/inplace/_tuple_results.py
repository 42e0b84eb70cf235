"""GT602/GT603's module results taken apart: ``a, b = self.block(x)`` where the block's
``forward`` returns a tuple, each element made by its own op.

# NOTE [tuple module results]
A module of the file whose every possible result (NOTE [module results]) is a tuple display
of the same width (``return c2, c3, c4, c5``) gives back, at place ``j``, what its ``j``-th
element is: the name read through its binding in that ``forward`` (``c2 =
self.up_add3(...)``), then the op that makes it (:func:`._ops._op_of_call`, with that class's
modules: a ReLU-ending block of its own). The places of one call are read only when the
caller writes one of the unpacked names in place (``_class_writes`` pairs them first); a block
of a ``ModuleList`` called in a loop (``for i, blk in enumerate(self.blocks)``) counts when
every block gives the same op at that place.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.module_results import EXPR, Built, bound_value, built
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.inplace._ops import _blocks_iterated, _init_value, _LazyModules, _op_of_call


def element_op(call: ast.Call, j: int, width: int, cls: ast.ClassDef, ctx: Context,
               scope: object) -> str | None:
    """The saved-output op that makes element ``j`` of the ``width``-tuple the module call
    ``call`` (in a method of ``cls``) gives back; None when not known."""
    got = _callee_built(call, cls, ctx, scope)
    if got is None:
        return None
    ops: set[str | None] = set()
    for m in got.makes:
        node = m.node
        if m.how != EXPR or not isinstance(node, ast.Tuple) or len(node.elts) != width \
                or any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        info = ctx.analysis.class_of(m.fn)
        if info is None:
            return None
        fscope = ctx.scope(m.fn)
        e = bound_value(node.elts[j], fscope, node.lineno)
        mods = ctx.memo("gt6-modules-all", info.node, lambda: _LazyModules(info.node, ctx, True))
        ops.add(_op_of_call(e, ctx, mods, fscope))
        if None in ops or len(ops) > 1:
            return None
    return ops.pop() if ops else None


def _callee_built(call: ast.Call, cls: ast.ClassDef, ctx: Context, scope: object
                  ) -> Built | None:
    """What the module ``call`` runs gives back: ``self.<attr>(...)``, ``self.<attr>[i](...)``
    or ``blk(...)`` with ``blk`` a loop's block of ``self.<attr>``."""
    f = call.func
    elem = False
    if isinstance(f, ast.Subscript):
        f, elem = f.value, True
    elif isinstance(f, ast.Name):
        b = scope.binding_before(f.id, call.lineno + 1)  # type: ignore[attr-defined]
        loop = b.stmt if b is not None and isinstance(b.stmt, (ast.For, ast.AsyncFor)) else None
        it = _blocks_iterated(loop, f.id) if loop is not None else None
        if it is None:
            return None
        f, elem = it, True
    name = dotted(f) or ""
    if not name.startswith("self.") or name.count(".") != 1:
        return None
    v = _init_value(cls, name[5:], ctx)
    info = ctx.analysis.classes.get(cls.name)
    init = info.methods.get("__init__") if info is not None else None
    got = built(v, ctx, init) if v is not None and init is not None else None
    return got if got is not None and got.container == elem else None
