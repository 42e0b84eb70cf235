"""Module classes of the file whose input is the output of a trained layer.

# NOTE [input fed by a layer]
A spiking neuron (``class LIFNode(nn.Module)``) has no layer of its own: the graph it works on
comes in through ``forward``'s input, the output of the convolution before it in
``nn.Sequential(Conv(...), BatchNorm(...), LIFNode())``. :func:`fed_by_layer` names the layer
whose output a class's instance is given, read where the file builds an instance:

* an element of ``nn.Sequential(...)`` (positional) after an element that holds weights (a
  torch layer with parameters, or a call under which one is built: ``Wrap(nn.Conv2d(...))``;
  NOTE [weighted modules]);
* ``self.<x> = C(...)`` in a module class's ``__init__`` and, in a method of that class,
  ``self.<x>(...)`` whose argument is a call of another weighted layer of the class
  (``self.node(self.conv(x))``) or a name the method last bound to such a call.

A raw-data normaliser applied first (``nn.Sequential(Normalize(), conv, ...)``, ``self.norm(x)``
on the batch) is fed no graph. A file that freezes anything answers None (a frozen layer's
output may be a leaf; NOTE [weighted modules]). Read by GT528 (NOTE [carried state]).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.modules import _own_statements
from gradtrace.lint.analysis.weighted_modules import FREEZE_RE, PARAMETER, SEQUENTIAL, WEIGHTED
from gradtrace.lint.nodes import of_types

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


def fed_by_layer(info: ClassInfo, ctx: Context) -> ast.AST | None:
    """The weighted layer (a call) whose output an instance of ``info``'s class is given
    (NOTE [input fed by a layer]); None when none is seen."""
    return ctx.memo("fed-by-layer", info.node, lambda: _fed(info, ctx))


def _weighted(e: ast.AST, ctx: Context) -> bool:
    """``e`` builds a module holding weights: a torch layer with parameters, any call under
    which one is built, or a module class of the file whose ``__init__`` builds one."""
    for c in of_types(e, (ast.Call,)):
        q = ctx.qualified_name(c.func) or ""  # type: ignore[attr-defined]
        if q in WEIGHTED or q in PARAMETER:
            return True
        f = c.func  # type: ignore[attr-defined]
        own = ctx.analysis.classes.get(f.id) if isinstance(f, ast.Name) else None
        init = own.methods.get("__init__") if own is not None and own.is_module else None
        if init is not None and any((ctx.qualified_name(x.func) or "") in WEIGHTED | PARAMETER
                                    for x in of_types(init, (ast.Call,))):  # type: ignore[attr-defined]
            return True
    return False


def _builds(e: ast.AST, name: str) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == name


def _fed(info: ClassInfo, ctx: Context) -> ast.AST | None:
    if FREEZE_RE.search(ctx.code):
        return None
    for c in of_types(ctx.tree, (ast.Call,)):
        if (ctx.qualified_name(c.func) or "") != SEQUENTIAL:  # type: ignore[attr-defined]
            continue
        args = c.args  # type: ignore[attr-defined]
        for i, a in enumerate(args):
            if _builds(a, info.name):
                before = next((b for b in reversed(args[:i]) if isinstance(b, ast.Call)
                               and _weighted(b, ctx)), None)
                if before is not None:
                    return before
    for owner in ctx.analysis.classes.values():
        init = owner.methods.get("__init__") if owner.is_module else None
        if init is None:
            continue
        attrs = {t.attr for s in of_types(init, (ast.Assign,)) if _builds(s.value, info.name)
                 for t in s.targets if isinstance(t, ast.Attribute)}  # type: ignore[attr-defined]
        if attrs:
            got = _fed_in_methods(owner, attrs, ctx)
            if got is not None:
                return got
    return None


def _layer_call(e: ast.AST, owner: ClassInfo, ctx: Context, attrs: set[str]) -> ast.AST | None:
    """``e`` is ``self.<layer>(...)`` with ``<layer>`` a weighted layer of ``owner``."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
            and isinstance(e.func.value, ast.Name) and e.func.value.id == "self"
            and e.func.attr not in attrs):
        return None
    init = owner.methods["__init__"]
    for s in of_types(init, (ast.Assign,)):
        if any(isinstance(t, ast.Attribute) and t.attr == e.func.attr
               for t in s.targets) and _weighted(s.value, ctx):  # type: ignore[attr-defined]
            return e
    return None


def _fed_in_methods(owner: ClassInfo, attrs: set[str], ctx: Context) -> ast.AST | None:
    for m in owner.methods.values():
        if m.name == "__init__":
            continue
        last: dict[str, ast.AST | None] = {}
        for s in _own_statements(m):
            for c in of_types(s, (ast.Call,)):
                f = c.func  # type: ignore[attr-defined]
                if not (isinstance(f, ast.Attribute) and f.attr in attrs
                        and isinstance(f.value, ast.Name) and f.value.id == "self"):
                    continue
                for a in c.args:  # type: ignore[attr-defined]
                    got = _layer_call(a, owner, ctx, attrs) or (
                        last.get(a.id) if isinstance(a, ast.Name) else None)
                    if got is not None:
                        return got
            if isinstance(s, ast.Assign):
                got = _layer_call(s.value, owner, ctx, attrs)
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        last[t.id] = got
    return None
