"""Plain classes: classes of the project that are neither modules nor torch's own classes.

# NOTE [plain classes]
A class whose bases are ``object`` (or nothing) or plain classes of the same file is plain:
nothing of torch runs when it is built or called. Its ``__call__`` and ``forward`` are only its
own methods (an adversarial attack's ``__call__`` returning its ``forward``'s images, a NumPy
layer's ``forward``): calling an instance runs no module and records nothing by itself; what
the method returns is read from its body like any function's. Its ``backward`` is its own too
(NOTE [manual backward]). A class deriving from anything else (``nn.Module``,
``torch.autograd.Function``, a class of another package or of another file) is not plain.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.project import home

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


def plain_lineage(cls: ClassInfo) -> bool:
    """``cls`` and its bases of the file derive from ``object`` only (NOTE [plain classes])."""
    if cls.is_module:
        return False
    lineage = list(cls.lineage())
    names = {c.name for c in lineage}
    return all(isinstance(b, ast.Name) and (b.id == "object" or b.id in names)
               for c in lineage for b in c.node.bases)


def plain_method(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` (of this file or another of the project) is a method of a plain class."""
    info = home(ctx, fn).analysis.class_of(fn)  # type: ignore[arg-type]
    return info is not None and plain_lineage(info)



def module_method(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef | None, callee: str,
                  where: ast.AST) -> bool:
    """``callee`` (resolved to ``fn``; None: not shown), called in ``where``, runs a module:
    ``self(...)``, ``self.forward(...)`` or ``self.__call__(...)`` in a method of a class that
    is not plain, any callee not shown, a ``forward`` or ``__call__`` that is not a plain
    class's own method (NOTE [plain classes])."""
    if callee in ("self", "self.forward", "self.__call__"):
        own = ctx.analysis.class_of(where)  # type: ignore[arg-type]
        return own is None or not plain_lineage(own)
    return fn is None or fn.name in ("forward", "__call__") and not plain_method(ctx, fn)
