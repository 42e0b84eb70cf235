"""Attributes a module class reads only as numbers (shared by the GT4 registration facts)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def number_attrs(c: ast.ClassDef, ctx: Context) -> frozenset[str]:
    """``self.<x>`` that the class reads only as a number: the value stored into an element of
    a tensor (``seq[i][idx] = self.mask_id``) or an operand of arithmetic or a comparison
    (``self.gamma * n``), at least once; a module is never read so (RecStudio's sequence
    augmentations, ``Item_Mask(mask_id)``, stored in a plain list by their holder)."""
    def make() -> frozenset[str]:
        parents = {id(ch): p for p in walk(c) for ch in ast.iter_child_nodes(p)}
        seen: dict[str, bool] = {}
        for n in walk(c):
            if not (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
                    and isinstance(n.value, ast.Name) and n.value.id == "self"):
                continue
            p = parents.get(id(n))
            ok = isinstance(p, (ast.BinOp, ast.Compare, ast.UnaryOp)) or isinstance(
                p, ast.Assign) and p.value is n and all(isinstance(t, ast.Subscript)
                                                       for t in p.targets)
            seen[n.attr] = seen.get(n.attr, True) and ok
        return frozenset(k for k, v in seen.items() if v)
    return ctx.memo("gt4-number-attrs", c, make)


def stores_number(n: ast.Assign, c: ast.ClassDef, ctx: Context) -> bool:
    """``self.x = arg`` of class ``c`` stores a number: every ``self.x`` it binds is read only
    as one (:func:`number_attrs`)."""
    return all(isinstance(t, ast.Attribute) and t.attr in number_attrs(c, ctx) for t in n.targets)
