"""The kind of a loop variable: ``for m in model.modules()`` (a module), ``for p in
model.parameters()`` (a parameter), or over a literal list or tuple of modules or parameters.

``convs = [R2Conv(2, 4), R2Conv(4, 4)]`` then ``for conv in convs: init(conv.weights)``:
``conv`` is a module of class ``R2Conv``, so ``conv.weights`` is the Parameter its
``__init__`` registers (NOTE [kinds]). Every element must have the same kind and class;
the kind is returned without its constructing node (the loop variable is each of them).

The same holds for an element of a ``torch.nn.ModuleList`` / ``Sequential`` whose elements
are all built by calls of one class (``nn.ModuleList(nn.Conv2d(c, k, 1) for c in ch)``,
``nn.Sequential(Block(), Block())``): ``self.m[0]``, ``for mi in self.m``, ``for mi, s in
zip(self.m, strides)`` and ``for i, mi in enumerate(self.m)`` are modules of that class; one
comprehension's element call is kept as the node (every element is built by it).
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
    got = element_kind(kind_of, loop, name, scope, depth)
    if got is not None:
        return got
    it, target = _iterated(loop.iter, loop.target, name)
    if it is None:
        return None
    k = kind_of(it, scope, loop.lineno, depth + 1)
    return layer_element(kind_of, k, scope, loop.lineno, depth) if k is not None else None


def _iterated(it: ast.expr, target: ast.expr, name: str) -> tuple[ast.expr | None, ast.expr]:
    """(the iterable, the target) that binds ``name``, through ``zip(...)`` and
    ``enumerate(...)`` of a tuple target."""
    if isinstance(target, ast.Name):
        return (it if target.id == name else None), target
    if not (isinstance(target, ast.Tuple) and isinstance(it, ast.Call)
            and isinstance(it.func, ast.Name) and not it.keywords):
        return None, target
    if it.func.id == "zip" and len(it.args) == len(target.elts):
        for a, t in zip(it.args, target.elts):
            if isinstance(t, ast.Name) and t.id == name:
                return a, t
    if it.func.id == "enumerate" and len(target.elts) == 2 and it.args \
            and isinstance(target.elts[1], ast.Name) and target.elts[1].id == name:
        return it.args[0], target.elts[1]
    return None, target


CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential"})


def layer_element(kind_of: KindOf, k: Kind, scope: Scope, line: int, depth: int,
                  index: ast.expr | None = None) -> Kind | None:
    """The kind of every element of the module container ``k`` (see the module's
    docstring), or of the one a constant ``index`` picks from its literal elements
    (:func:`indexed`); or None."""
    if k.what != MODULE or k.cls not in CONTAINERS or not isinstance(k.node, ast.Call):
        return None
    args = k.node.args
    if k.cls == "torch.nn.ModuleList":
        if len(args) != 1:
            return None
        args = args[0]
        if isinstance(args, (ast.List, ast.Tuple)):
            args = args.elts
    picked = indexed(args, index) if isinstance(args, list) else None
    if picked is not None:
        return kind_of(picked, scope, line, depth + 1)
    if k.cls == "torch.nn.ModuleList":
        if isinstance(args, (ast.ListComp, ast.GeneratorExp)) and len(args.generators) == 1:
            e = kind_of(args.elt, scope, line, depth + 1)
            return Kind(e.what, cls=e.cls, node=args.elt) if e is not None \
                and e.what == MODULE else None
        if not isinstance(args, list):
            return None
    if not args or any(not isinstance(a, ast.Call) for a in args):
        return None
    kinds = {(x.what, x.cls) if x is not None else None
             for x in (kind_of(a, scope, line, depth + 1) for a in args)}
    if len(kinds) != 1 or None in kinds or next(iter(kinds))[0] != MODULE:  # type: ignore[index]
        return None
    return Kind(MODULE, cls=next(iter(kinds))[1])  # type: ignore[index]


def indexed(args: list[ast.expr], index: ast.expr | None) -> ast.expr | None:
    """The element a constant ``index`` picks from a container's literal elements (``-1``
    included), when no ``*spread`` lies between it and the end it counts from: in
    ``nn.ModuleList([*self.backbone, Detect(...)])``, ``[-1]`` is the ``Detect(...)``."""
    i = index.operand if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) \
        else index
    if not isinstance(i, ast.Constant) or type(i.value) is not int:
        return None
    at = -i.value if i is not index else i.value
    if not -len(args) <= at < len(args):
        return None
    span = args[at:] if at < 0 else args[:at + 1]
    return None if any(isinstance(a, ast.Starred) for a in span) else args[at]


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


def _unwraps(e: ast.IfExp) -> bool:
    """``x.a if hasattr(x, "a") else x`` (either order): both branches are ``x`` itself or
    what wraps it, so either answers what ``x`` is."""
    t = e.test
    if not (isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and t.func.id == "hasattr"
            and len(t.args) == 2 and isinstance(t.args[1], ast.Constant)):
        return False
    x, attr = dotted(t.args[0]), t.args[1].value
    sides = {dotted(e.body), dotted(e.orelse)}
    return x is not None and sides == {x, f"{x}.{attr}"}


def unwrapped_kind(kind: KindOf, e: ast.IfExp, scope: Scope, line: int,
                   depth: int) -> Kind | None:
    """The kind of ``m.module if hasattr(m, "module") else m``: what either branch is."""
    if not _unwraps(e):
        return None
    return kind(e.body, scope, line, depth + 1) or kind(e.orelse, scope, line, depth + 1)
