"""The last layer a module's ``forward`` runs when it loops over its own blocks.

# NOTE [looped layers]
``for layer in self.layers: x = layer(x)`` then ``return x`` gives back what the LAST layer
of ``self.layers`` gives back. ``self.layers = nn.ModuleList()`` filled by ``append`` calls in
``__init__`` (or a local ``layers = []`` so filled, then given as ``nn.ModuleList(layers)``;
in loops, under ``if`` tests on ``__init__``'s arguments) ends in the last
``append`` the constructing call's arguments keep: an ``if act_cfg:`` arm counts when the
argument given (or passed on from the enclosing constructor's default) is a constant, a dict
literal or a ``dict(...)`` call; a test that depends on more (the loop index, an attribute)
leaves the last layer unknown. A loop over the container is assumed to run once at least.
NOTE [module results] reads that layer's result like any other.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.flag_truth import truth_under
from gradtrace.lint.analysis.init_arguments import init_arguments
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

_TRUTHY = object()  # a non-empty dict: true in an ``if``, equal to no constant


def looped_last(v: ast.AST, fwd: ast.AST, info: ClassInfo, ctx: Context, call: ast.Call,
                where: ast.AST | None) -> tuple[ast.AST, ast.AST] | None:
    """(the expression building the last layer, the method it is in) when ``v`` is
    ``layer(x)`` of ``for layer in self.<attr>: x = layer(x)`` in ``fwd`` of the class
    ``info`` built by ``call`` (read in ``where``); None when not known."""
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)):
        return None
    loop = next((n for n in walk(fwd) if isinstance(n, ast.For) and len(n.body) == 1
                 and isinstance(n.target, ast.Name) and n.target.id == v.func.id
                 and n.body[0].value is v  # type: ignore[attr-defined]
                 and isinstance(n.body[0], ast.Assign)), None)
    name = dotted(loop.iter) if loop is not None else None
    if not name or not name.startswith("self.") or name.count(".") != 1:
        return None
    attr = info.attrs.get(name[5:])
    init = info.methods.get("__init__")
    if attr is None or attr.later or attr.method is not init or init is None \
            or not isinstance(attr.value, ast.Call) or attr.value.keywords \
            or (ctx.qualified_name(attr.value.func) or "") != "torch.nn.ModuleList":
        return None
    parents = {id(c): p for p in walk(init) for c in ast.iter_child_nodes(p)}
    target, made = name, _stmt_of(attr.value, parents)
    if attr.value.args:  # `self.layers = nn.ModuleList(layers)` of a local `layers = []`
        arg = attr.value.args[0]
        scope = ctx.scope(init)
        b = scope.binding_before(arg.id, attr.value.lineno) if len(attr.value.args) == 1 \
            and isinstance(arg, ast.Name) else None
        if b is None or not isinstance(b.value, ast.List) or b.value.elts \
                or not isinstance(b.stmt, ast.Assign) or len(b.stmt.targets) != 1:
            return None
        target, made = arg.id, b.stmt
    appends = []
    for n in walk(init):
        if isinstance(n, (ast.Assign, ast.AugAssign)) and n is not made and n is not _stmt_of(
                attr.value, parents) and any(
                dotted(t.value if isinstance(t, ast.Subscript) else t) == target
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])):
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == target:
            if n.func.attr != "append" or len(n.args) != 1:
                return None
            if target != name and n.lineno > attr.value.lineno:
                return None  # appended after the ModuleList copied the list
            appends.append(n)
    values = _values(info, call, where)
    for n in sorted(appends, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        kept = _kept(n, init, parents, values)
        if kept is None:
            return None
        if kept:
            return n.args[0], init
    return None


def _stmt_of(e: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    return parents.get(id(e))


def _kept(n: ast.AST, init: ast.AST, parents: dict[int, ast.AST],
          values: dict[str, object]) -> bool | None:
    """Whether the ``append`` ``n`` runs under the constructor's arguments (None: unknown)."""
    child, p = n, parents.get(id(n))
    while p is not None and p is not init:
        if isinstance(p, ast.If):
            t = truth_under(p.test, values)
            if t is None:
                return None
            if t != (child in p.body):
                return False
        elif isinstance(p, (ast.While, ast.Try, ast.With, ast.IfExp, ast.BoolOp)) \
                or isinstance(p, ast.For) and child in p.orelse:
            return None
        child, p = p, parents.get(id(p))
    return True


def _values(info: ClassInfo, call: ast.Call, where: ast.AST | None) -> dict[str, object]:
    """``$arg`` -> the constant (or a truthy marker for a dict) ``call`` gives ``__init__``'s
    argument, or its default; an argument passed on from ``where`` counts as its default."""
    out: dict[str, object] = {}
    for p, v in init_arguments(info, call, where):
        if isinstance(v, ast.Constant):
            out["$" + p] = v.value
        elif isinstance(v, ast.Dict) and v.keys or isinstance(v, ast.Call) and isinstance(
                v.func, ast.Name) and v.func.id == "dict" and v.keywords and not v.args:
            out["$" + p] = _TRUTHY
    return out
