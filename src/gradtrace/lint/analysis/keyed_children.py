"""Submodules a module holds by name inside a ``ModuleDict`` built in one statement.

# NOTE [keyed children]
A model often keeps its parts in a container made once, in ``__init__``:
``self.body = nn.ModuleDict(dict(embed=nn.Embedding(v, d), layers=nn.ModuleList([...]),
norm=nn.LayerNorm(d)))`` (or a dict literal with constant string keys), and runs them as
``self.body.embed(idx)``, ``for layer in self.body.layers``, ``self.body["norm"](x)``. Each
key is a submodule of its own: a cut may sever one key's path to the outputs while another
key stays live, so reading the container as one submodule hides the cut. :func:`child_path`
names ``self.body.embed`` / ``self.body["embed"]`` as ``"body.embed"`` when ``self.body`` is
assigned once, to ``torch.nn.ModuleDict`` of such a literal (no ``**`` spread) that holds the
key; anything else (a key added later, a computed key, a dict built elsewhere) is not
resolved, and the container stays one submodule.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

MODULE_DICT = "torch.nn.ModuleDict"


def keyed_children(ctx: Context, cls: ClassInfo, attr: str) -> dict[str, ast.expr]:
    """Key -> the expression building it, for ``self.<attr>`` (NOTE [keyed children])."""
    info = cls.attrs.get(attr)
    if info is None or info.later or not isinstance(info.value, ast.Call):
        return {}
    v = info.value
    if len(v.args) != 1 or v.keywords or ctx.qualified_name(v.func) != MODULE_DICT:
        return {}
    lit = v.args[0]
    if isinstance(lit, ast.Call) and isinstance(lit.func, ast.Name) and lit.func.id == "dict" \
            and not lit.args:
        if any(k.arg is None for k in lit.keywords):
            return {}
        return {k.arg: k.value for k in lit.keywords if k.arg is not None}
    if isinstance(lit, ast.Dict):
        out: dict[str, ast.expr] = {}
        for k, e in zip(lit.keys, lit.values):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                return {}
            out[k.value] = e
        return out
    return {}


def child_path(ctx: Context, cls: ClassInfo, e: ast.AST) -> str | None:
    """``"body.embed"`` for ``self.body.embed`` / ``self.body["embed"]``
    (NOTE [keyed children]), else None."""
    if isinstance(e, ast.Attribute):
        key: object = e.attr
    elif isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
        key = e.slice.value
    else:
        return None
    holder = e.value
    if not (isinstance(key, str) and isinstance(holder, ast.Attribute)
            and isinstance(holder.value, ast.Name) and holder.value.id == "self"):
        return None
    kids = ctx.memo("keyed-children", cls.node, lambda: {})
    if holder.attr not in kids:
        kids[holder.attr] = keyed_children(ctx, cls, holder.attr)
    return f"{holder.attr}.{key}" if key in kids[holder.attr] else None
