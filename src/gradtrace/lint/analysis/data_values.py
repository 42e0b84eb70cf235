"""Values computed only from data: no leaf that requires grad, no weight, anywhere upstream.

# NOTE [data values]
A value is computed only from data at a line when it is graphless data there
(NOTE [graphless data]: new tensors, detached ones, ``torch`` ops of them, none asked to require grad), or is
built from such values through plain names (one dominating assignment each), arithmetic,
tensor methods (``.mean()``, ``.to(...)``), ``torch`` functions and the run of a **weightless
module of the file**: an instance of a class deriving ``torch.nn.Module`` directly that builds
no weight (``grad_values.weighted``), is built from constants, calls no submodule or method
on ``self`` (other than its own methods) and reads no name of the file but imports and
classes: a loss written as a module (``Poly1Loss(num_classes=5)(logits, labels)``) gives
data when handed data. Not data when a name it is made from is handed, before the line, to a
call that could mark it (a function or method that is neither ``torch``, a builtin nor a
weightless module: ``enable(x)`` may run ``x.requires_grad_()``).
"""
from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.grad_values import weighted
from gradtrace.lint.analysis.graphless import graphless_data
from gradtrace.lint.flow_kinds import DETACHED, LEAF
from gradtrace.lint.nodes import scope_nodes, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

BUILTINS = frozenset(dir(builtins))
# namespaces of tensor functions (whose results depend only on their arguments)
TORCH_OPS = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.special",
                       "torch.fft"})
NOT_OPS = frozenset({"load", "from_file", "frombuffer"})
MAX_DEPTH = 8


def data_value(ctx: Context, scope: Scope, e: ast.expr, line: int) -> dict[str, ast.stmt] | None:
    """The names (with their bindings) ``e`` is computed from when it is computed only from
    data at ``line`` (NOTE [data values]), else None."""
    names: dict[str, ast.stmt] = {}
    if not _data(ctx, scope, e, line, names, 0):
        return None
    if _handed_away(ctx, scope, names, line):
        return None
    return names


def _data(ctx: Context, scope: Scope, e: ast.expr, line: int, names: dict[str, ast.stmt],
          depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float, str)) and not isinstance(e.value, bool)
    if isinstance(e, ast.Name):
        b = scope.binding_before(e.id, line)
        if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None or \
                len(b.stmt.targets) != 1 or not isinstance(b.stmt.targets[0], ast.Name) or \
                len(scope.bindings.get(e.id, ())) != 1:
            return False
        names[e.id] = b.stmt
        if graphless_data(e, scope, line):
            _leaves(scope, b.value, b.line, names, 0)
            return True
        return _data(ctx, scope, b.value, b.line, names, depth + 1)
    if isinstance(e, ast.BinOp):
        return _data(ctx, scope, e.left, line, names, depth + 1) and \
            _data(ctx, scope, e.right, line, names, depth + 1)
    if isinstance(e, ast.UnaryOp):
        return _data(ctx, scope, e.operand, line, names, depth + 1)
    if not isinstance(e, ast.Call):
        return False
    args = [*e.args, *(k.value for k in e.keywords)]
    if any(isinstance(a, ast.Starred) for a in e.args) or any(k.arg is None for k in e.keywords):
        return False
    if any(k.arg == "requires_grad" for k in e.keywords):
        return False
    f = e.func
    q = ctx.qualified_name(f) or ""
    home, _, last = q.rpartition(".")
    if home in TORCH_OPS and last[:1].islower() and last not in NOT_OPS:
        pass
    elif weightless_module(ctx, scope, f, line):
        pass
    elif isinstance(f, ast.Attribute) and not q.startswith("torch.") and \
            f.attr not in ("requires_grad_", "retain_grad", "backward"):
        if not _data(ctx, scope, f.value, line, names, depth + 1):
            return False
    else:
        return False
    return all(_data_arg(ctx, scope, a, line, names, depth + 1) for a in args)


def _data_arg(ctx: Context, scope: Scope, a: ast.expr, line: int, names: dict[str, ast.stmt],
              depth: int) -> bool:
    """An argument: data, a constant, a ``dtype``/``device`` attribute or a list of data."""
    if isinstance(a, ast.Attribute) and (a.attr in ("device", "dtype", "shape") or (
            ctx.qualified_name(a) or "").startswith("torch.")):
        return True
    if isinstance(a, (ast.List, ast.Tuple)):
        return all(_data_arg(ctx, scope, x, line, names, depth) for x in a.elts)
    return _data(ctx, scope, a, line, names, depth)


def _leaves(scope: Scope, e: ast.expr, line: int, names: dict[str, ast.stmt], depth: int) -> None:
    """Add the names graphless ``e`` is made from (for the marking check)."""
    if depth > MAX_DEPTH:
        return
    for n in walk(e):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in names:
            b = scope.binding_before(n.id, line)
            if b is not None and isinstance(b.stmt, ast.Assign) and b.value is not None \
                    and b.kind in (LEAF, DETACHED):
                names[n.id] = b.stmt
                _leaves(scope, b.value, b.line, names, depth + 1)


def weightless_module(ctx: Context, scope: Scope, f: ast.expr, line: int) -> bool:
    """``f`` is an instance of a weightless module class of the file (NOTE [data values]):
    ``Cls(...)`` itself, or a name bound once to it."""
    if isinstance(f, ast.Name):
        b = scope.binding_before(f.id, line)
        if b is None or not isinstance(b.value, ast.Call) or \
                len(scope.bindings.get(f.id, ())) != 1:
            return False
        f = b.value
    if not isinstance(f, ast.Call) or not isinstance(f.func, ast.Name):
        return False
    if not all(_constant(scope, a, line) for a in (*f.args, *(k.value for k in f.keywords))):
        return False
    info = ctx.analysis.classes.get(f.func.id)
    if info is None or not info.is_module or "forward" not in info.methods:
        return False
    return ctx.memo("weightless-module", info.node, lambda: _weightless(ctx, info))


def _constant(scope: Scope, a: ast.expr, line: int) -> bool:
    if isinstance(a, ast.Constant):
        return True
    if isinstance(a, ast.Name):
        b = scope.binding_before(a.id, line)
        return b is not None and isinstance(b.value, ast.Constant)
    return False


def _weightless(ctx: Context, info: object) -> bool:
    node: ast.ClassDef = info.node  # type: ignore[attr-defined]
    if len(node.bases) != 1 or (ctx.qualified_name(node.bases[0]) or "") != "torch.nn.Module":
        return False
    if weighted(ctx, node.name, None):
        return False
    own = set(info.methods)  # type: ignore[attr-defined]
    classes = ctx.analysis.classes
    for fn in node.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        local = {a.arg for a in walk(fn.args) if isinstance(a, ast.arg)} | {
            n.id for n in walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        for n in walk(fn):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local \
                    and n.id not in BUILTINS and not ctx.imports.is_imported(n.id) and (
                        n.id not in classes or n.id != node.name and classes[n.id].is_module):
                return False  # a global, a function of the file, another module class
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                root = n.func.value
                if isinstance(root, ast.Name) and root.id == "self" and n.func.attr not in own:
                    return False
                if isinstance(root, ast.Attribute) and isinstance(root.value, ast.Name) and \
                        root.value.id == "self":
                    return False
    return True


def _handed_away(ctx: Context, scope: Scope, names: dict[str, ast.stmt], line: int) -> bool:
    """A name of ``names`` is written in place or marked anywhere in the scope (``x[i] = v``,
    ``x.requires_grad = True``, ``x += v``, ``x.add_(v)``, ``x.requires_grad_()``), or given,
    before ``line``, to a call that could mark it."""
    for n in scope_nodes(scope.node):
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store) \
                and _root(n) in names:
            return True
        if isinstance(n, ast.AugAssign) and _root(n.target) in names:
            return True
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr.endswith("_") and \
                not f.attr.startswith("_") and _root(f.value) in names:
            return True
        if getattr(n, "lineno", line) >= line:
            continue
        given = [a for a in (*n.args, *(k.value for k in n.keywords))]
        if not any(isinstance(x, ast.Name) and x.id in names
                   for a in given for x in walk(a)):
            continue
        q = ctx.qualified_name(f) or ""
        if q.startswith("torch.") or (isinstance(f, ast.Name) and f.id in BUILTINS
                                      and f.id not in ctx.analysis.classes):
            continue
        if weightless_module(ctx, scope, f, n.lineno):
            continue
        return True
    return False


def marked_later(ctx: Context, scope: Scope, name: str, bind: ast.stmt, use: ast.AST) -> bool:
    """Whether the tensor bound to ``name`` by ``bind`` may be asked to require grad before
    ``use`` reads it: flagged or written in place (``x.requires_grad = True``,
    ``x.requires_grad_()``), aliased (``y = x``), put in a container or handed to a call that
    may mark it (``_may_mark``), at a line from ``bind`` to ``use`` (or anywhere in a loop
    around ``use``)."""
    skip = {id(x) for x in walk(use)} | {id(x) for x in walk(bind)}
    first, last = bind.lineno, getattr(use, "lineno", bind.lineno)
    loops = [(n.lineno, n.end_lineno or n.lineno) for n in scope_nodes(scope.node)
             if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
             and n.lineno <= last <= (n.end_lineno or n.lineno)]
    if loops:
        first, last = min(first, *(a for a, _ in loops)), max(last, *(b for _, b in loops))
    parents: dict[int, ast.AST] = {}
    for n in scope_nodes(scope.node):
        for c in ast.iter_child_nodes(n):
            parents[id(c)] = n
    for n in scope_nodes(scope.node):
        if not isinstance(n, ast.Name) or n.id != name or id(n) in skip or \
                not isinstance(n.ctx, ast.Load) or not first <= getattr(n, "lineno", 0) <= last:
            continue
        p = parents.get(id(n))
        if isinstance(p, ast.AugAssign) or isinstance(p, ast.Subscript) and \
                isinstance(p.ctx, ast.Store):
            return True
        if isinstance(p, ast.Attribute) and isinstance(p.ctx, ast.Store):
            return True
        if isinstance(p, ast.Attribute) and isinstance(parents.get(id(p)), ast.Call) and \
                parents[id(p)].func is p and p.attr.endswith("_"):  # type: ignore[attr-defined]
            return True
        if isinstance(p, (ast.Assign, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Starred,
                          ast.keyword, ast.Return, ast.Yield)):
            return True
        if isinstance(p, ast.Call) and n is not p.func and _may_mark(ctx, p, parents):
            return True
    return False


def _may_mark(ctx: Context, call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    """A call handed a tensor may ask it to require grad: a function of the file that flags or
    marks something (``t.requires_grad = True``, ``t.requires_grad_()``), or a call of
    another library whose result is dropped (``enable(x)``); not a ``torch`` function, not a
    call whose result is kept (a forward: ``score = critic(mix)``)."""
    if (ctx.qualified_name(call.func) or "").startswith("torch."):
        return False
    fn = ctx.analysis.functions.get(call.func.id) if isinstance(call.func, ast.Name) else None
    if fn is not None:
        return any(isinstance(x, ast.Attribute) and (
            x.attr == "requires_grad" and isinstance(x.ctx, ast.Store) or
            x.attr == "requires_grad_") for x in walk(fn))
    return isinstance(parents.get(id(call)), ast.Expr)


def _root(e: ast.AST) -> str | None:
    while isinstance(e, (ast.Subscript, ast.Attribute)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None
