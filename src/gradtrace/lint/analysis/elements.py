"""The kind of a loop variable: ``for m in model.modules()`` (a module), ``for p in
model.parameters()`` (a parameter), or over a literal list or tuple of modules or parameters.

``convs = [R2Conv(2, 4), R2Conv(4, 4)]`` then ``for conv in convs: init(conv.weights)``:
``conv`` is a module of class ``R2Conv``, so ``conv.weights`` is the Parameter its
``__init__`` registers (NOTE [kinds]). Every element must have the same kind and class;
the kind is returned without its constructing node (the loop variable is each of them).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.kinds import CONTAINER, MODULE, PARAMETER, Kind
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

KindOf = Callable[[ast.AST, "Scope", int, int], "Kind | None"]


def loop_kind(kind_of: KindOf, loop: ast.For | ast.AsyncFor, name: str, scope: Scope,
              depth: int) -> Kind | None:
    """The kind of ``name`` bound by ``loop``, or None (see the module's docstring)."""
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
            and dotted(loop.target) == name and it.func.attr in ("modules", "children"):
        return Kind(MODULE)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
            and dotted(loop.target) == name and it.func.attr == "parameters":
        return Kind(PARAMETER)
    return element_kind(kind_of, loop, name, scope, depth)


def element_kind(kind_of: KindOf, loop: ast.For | ast.AsyncFor, name: str, scope: Scope,
                 depth: int) -> Kind | None:
    """The kind of ``name`` bound by ``loop`` (``for name in <list of one kind>``), or None.
    ``kind_of`` is the analysis' own kind query (expression, scope, line, depth)."""
    if not isinstance(loop.target, ast.Name) or loop.target.id != name:
        return None
    k = kind_of(loop.iter, scope, loop.lineno, depth + 1)
    if k is None or k.what != CONTAINER or not isinstance(k.node, (ast.List, ast.Tuple)):
        return None
    kinds = {(x.what, x.cls) if x is not None else None
             for x in (kind_of(e, scope, loop.lineno, depth + 1) for e in k.node.elts)}
    if len(kinds) != 1 or None in kinds:
        return None
    what, cls = kinds.pop()  # type: ignore[misc]
    return Kind(what, cls=cls)
