"""GT105 through a helper of the input: a module's ``forward`` passes its input through a
function of the file that returns it read through ``.data`` (brevitas' ``pad_to_dim``).

# NOTE [input cut by a helper]
A ``.data`` in ``forward`` on the module's own input is not judged (the input may be data, as
for a first layer). It is a cut of real layers when the file shows what comes before: the
module is built inside an ``nn.Sequential(...)`` after a layer with weights (a ``torch.nn``
layer or a module class of the file holding a Parameter), so its input is that layer's
output. The ``.data`` sits in a helper called by ``forward`` (``inp = pad_to_dim(inp, ...)``,
every use of that parameter in the helper a cut: :class:`~gradtrace.lint.analysis.param_cuts.
CutParams`), the helper returns what it computes from it, and ``forward`` returns what it
computes from the helper's result: every layer before the module gets no gradient through
it. The ``.data`` line, in the helper, is reported (using the tensor itself is the fix).
The same ``.data`` written in ``forward`` itself (a hand-written layer norm's ``x = x.data``)
counts when the file shows the module's input is a layer's output: built in such an
``nn.Sequential``, or held by another module class of the file (``self.norm =
SimpleLayerNorm(d)``) whose ``forward`` calls it on a value computed from one of its own
layers with weights (``self.norm(torch.relu(self.inp(x)))``).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator

from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.analysis.grad_values import WEIGHTED
from gradtrace.lint.analysis.param_cuts import cut_params
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.graph_breaks._data_uses import META_ATTRS
from gradtrace.lint.rules.graph_breaks._layer_source import _return_deps

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope


def _returned_data(fn: ast.AST, ctx: Context, param: str) -> ast.Attribute | None:
    """The ``<param>.data`` of ``fn`` whose value its return values are built from (not a
    read of metadata: ``t.data.shape``)."""
    scope = ctx.scope(fn)
    deps = _return_deps(scope)
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}
    for s in scope.stmts:
        keeps = isinstance(s, ast.Return) or isinstance(s, ast.Assign) and any(
            isinstance(n, ast.Name) and n.id in deps for t in s.targets for n in ast.walk(t))
        if not keeps:
            continue
        for n in ast.walk(s.value if s.value is not None else s):  # type: ignore[attr-defined]
            if isinstance(n, ast.Attribute) and n.attr == "data" \
                    and isinstance(n.value, ast.Name) and n.value.id == param:
                up = parents.get(id(n))
                if isinstance(up, ast.Attribute) and up.attr in META_ATTRS:
                    continue
                if isinstance(up, ast.Call) and dotted(up.func) in ("len", "type", "isinstance"):
                    continue
                return n
    return None


def _forward_keeps(call: ast.Call, where: ast.AST, ctx: Context) -> str | None:
    """The name of ``forward``'s input (its first parameter after ``self``) when ``call``, in
    the ``forward`` ``where``, is bound to a name ``forward`` returns values built from."""
    cls = ctx.analysis.class_of(where)
    if cls is None or not cls.is_module or cls.methods.get("forward") is not where:
        return None
    a = where.args  # type: ignore[attr-defined]
    params = [x.arg for x in (*a.posonlyargs, *a.args)]
    if len(params) < 2:
        return None
    scope = ctx.scope(where)
    deps = _return_deps(scope)
    for s in scope.stmts:
        if isinstance(s, ast.Assign) and s.value is call and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and s.targets[0].id in deps \
                and scope.grad_off_at(s) is None:
            return params[1]
    return None


def _weighted(e: ast.AST, ctx: Context) -> bool:
    """``e`` builds a layer with weights: a ``torch.nn`` one, or a module class of the file
    holding a Parameter or such a layer."""
    if not isinstance(e, ast.Call):
        return False
    if (ctx.qualified_name(e.func) or "") in WEIGHTED:
        return True
    other = ctx.analysis.classes.get(dotted(e.func) or "")
    return other is not None and other.is_module and any(
        isinstance(n, ast.Call) and ctx.qualified_name(n.func) in WEIGHTED | {
            "torch.nn.Parameter"} for n in ast.walk(other.node))


def forward_input_cut(fn: ast.AST, ctx: Context) -> tuple[ast.Attribute, ast.AST] | None:
    """(the ``.data`` node, the call or Sequential that feeds the module a layer's output)
    for a ``.data`` of ``forward``'s own input in what it returns
    (NOTE [input cut by a helper])."""
    cls = ctx.analysis.class_of(fn)
    if cls is None or not cls.is_module or cls.methods.get("forward") is not fn:
        return None
    a = fn.args  # type: ignore[attr-defined]
    params = [x.arg for x in (*a.posonlyargs, *a.args)]
    if len(params) < 2:
        return None
    data = _returned_data(fn, ctx, params[1])
    if data is None or not any(  # the input itself rebound, or returned: not statistics of it
            isinstance(s, ast.Return) and s.value is not None and data in ast.walk(s.value)
            or isinstance(s, ast.Assign) and s.value is data for s in ast.walk(fn)):
        return None
    feed = _after_weighted_layer(cls.name, ctx) or _held_and_fed(cls.name, ctx)
    return (data, feed) if feed is not None else None


def _layered(e: ast.AST, line: int, scope: Scope, weighted: set[str], depth: int = 0) -> bool:
    """``e`` (read at ``line``) is computed from a call of one of the ``weighted`` layers of
    ``self``, through the bindings before it (four steps back)."""
    for n in ast.walk(e):
        f = n.func if isinstance(n, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and f.value.id == "self" and f.attr in weighted:
            return True
        if isinstance(n, ast.Name) and depth < 4:
            b = scope.binding_before(n.id, line)
            v = getattr(b, "value", None) if b is not None else None
            if v is not None and _layered(v, b.stmt.lineno, scope, weighted, depth + 1):
                return True
    return False


def _held_and_fed(cls_name: str, ctx: Context) -> ast.Call | None:
    """A call ``self.<attr>(v)`` in the ``forward`` of another module class of the file, where
    ``self.<attr> = cls_name(...)`` and ``v`` is computed from a call of one of that class's
    layers with weights (directly or through a name bound before in ``forward``)."""
    for info in ctx.analysis.classes.values():
        fwd = info.methods.get("forward") if info.is_module and info.name != cls_name else None
        if fwd is None:
            continue
        attrs = info.attrs
        held = {n for n, at in attrs.items() if isinstance(at.value, ast.Call)
                and dotted(at.value.func) == cls_name}
        if not held:
            continue
        weighted = {n for n, at in attrs.items() if _weighted(at.value, ctx)}
        scope = ctx.scope(fwd)
        for n in ast.walk(fwd):
            f = n.func if isinstance(n, ast.Call) else None
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id == "self" and f.attr in held and n.args \
                    and scope.grad_off_at(n) is None \
                    and _layered(n.args[0], n.lineno, scope, weighted):
                return n
    return None


def _after_weighted_layer(cls_name: str, ctx: Context) -> ast.Call | None:
    """An ``nn.Sequential(...)`` of the file holding ``cls_name(...)`` after a layer with
    weights."""
    def weighted(e: ast.AST) -> bool:
        return _weighted(e, ctx)
    for n in ast.walk(ctx.tree):
        if isinstance(n, ast.Call) and ctx.qualified_name(n.func) == "torch.nn.Sequential":
            for i, e in enumerate(n.args):
                if isinstance(e, ast.Call) and dotted(e.func) == cls_name \
                        and any(weighted(b) for b in n.args[:i]):
                    return n
    return None


def input_cuts(fn: ast.AST, ctx: Context
               ) -> Iterator[tuple[ast.Attribute, ast.AST, ast.Call, ast.Call]]:
    """(the ``.data`` node, the ``forward`` calling ``fn``, that call, the Sequential) for a
    plain function ``fn`` of the file (NOTE [input cut by a helper])."""
    if not isinstance(fn, FUNCTION_TYPES) or ctx.analysis.class_of(fn) is not None:
        return
    cut = cut_params(ctx).get(fn.name)
    if not cut:
        return
    a = fn.args
    params = [x.arg for x in (*a.posonlyargs, *a.args)]
    for i in sorted(cut):
        if i >= len(params):
            continue
        data = _returned_data(fn, ctx, params[i])
        if data is None:
            continue
        for call, where in function_sites(ctx.analysis, fn) or ():
            arg = ctx.analysis.arguments(fn, call).get(params[i])
            inp = _forward_keeps(call, where, ctx) if isinstance(arg, ast.Name) else None
            if inp is None or arg.id != inp or ctx.scope(where).binding_before(  # type: ignore[union-attr]
                    inp, call.lineno) is not None:
                continue  # (the input itself, not rebound first)
            cls = ctx.analysis.class_of(where)
            seq = _after_weighted_layer(cls.name, ctx) if cls is not None else None
            if seq is not None:
                yield data, where, call, seq
                return
