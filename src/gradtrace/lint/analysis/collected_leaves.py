"""Values a loop collects that hold no graph: arrays, or fresh leaves a passed-in loss made.

# NOTE [fresh leaves collected]
``batch_loss = loss(y, y_pred)``, then ``history[-1].append(batch_loss)`` (GT505): ``loss``
is a parameter of the training function, and every call of that function (in its file and
the others: NOTE [passed callees]) passes an instance of one module class (``loss =
GraphLoss(); fit(model, optimizer, loss, train)``, the class of another file or this one)
whose ``forward`` returns only tensors made anew by ``torch.tensor(...)`` /
``torch.from_numpy(...)``, or a list, tuple or comprehension of them. ``torch.tensor`` copies
its data into a leaf without history, with ``requires_grad=True`` too (checked on torch 2.13:
``grad_fn`` is None, ``is_leaf`` True), so the collected values keep no graph alive. Only for
a value collected whole by ``.append(...)``: adding a leaf that requires grad (``total +=
x``) records one node per step, which the existing reading keeps. That such a loss reaches no
parameter at all is another defect, not this rule's.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.graphless_returns import FRESH_LEAVES
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.passed_callees import passed_values
from gradtrace.lint.analysis.project import foreign_def
from gradtrace.lint.analysis.returned_arrays import unpacked_arrays
from gradtrace.lint.grad_modes import FUNCTION_TYPES
from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def no_graph_collected(ctx: Context, scope: object, fn: ast.AST, s: ast.stmt,
                       value: ast.expr) -> bool:
    """``value``, collected by ``s``, holds no graph: arrays a function of the file returns
    (NOTE [returned arrays]) or fresh leaves (NOTE [fresh leaves collected])."""
    return unpacked_arrays(ctx, scope, value, s.lineno) or _fresh_collected(  # type: ignore
        ctx, scope, fn, s, value)


def _fresh_collected(ctx: Context, scope: object, fn: ast.AST, s: ast.stmt,
                     value: ast.expr) -> bool:
    c = s.value if isinstance(s, ast.Expr) else None
    if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "append" and c.args and c.args[0] is value
            and isinstance(value, ast.Name) and isinstance(fn, FUNCTION_TYPES)):
        return False
    bs = scope.bindings.get(value.id, ())  # type: ignore[attr-defined]
    return bool(bs) and all(
        isinstance(b.stmt, ast.Assign) and isinstance(v := b.stmt.value, ast.Call)
        and isinstance(v.func, ast.Name) and _passed_leaves(ctx, fn, v.func.id) for b in bs)


def _passed_leaves(ctx: Context, fn: ast.AST, name: str) -> bool:
    """Every value passed for the callee parameter ``name`` is an instance of a module class
    whose ``forward`` returns fresh leaves only; once per function and name."""
    def make() -> bool:
        values = passed_values(ctx, fn, name, strict=True)
        return bool(values) and all(_leaf_module(c, v, w, line) for c, v, w, line in values)
    return ctx.memo("passed-leaves:" + name, fn, make)


def _leaf_module(ctx: Context, v: ast.expr, where: ast.AST, line: int) -> bool:
    k = ctx.analysis.kind_in(v, where, line)
    if k is None or k.what != MODULE or not k.cls:
        return False
    info = ctx.analysis.classes.get(k.cls)
    home, cls = (ctx, info.node) if info is not None else (None, None)
    if cls is None and isinstance(k.node, ast.Call):
        got = foreign_def(ctx, k.node.func)
        home, cls = got if got is not None else (None, None)
    if not isinstance(cls, ast.ClassDef) or home is None:
        return False
    run = next((m for m in cls.body if isinstance(m, FUNCTION_TYPES)
                and m.name == "forward"), None)
    rets = [r for r in bfs_walk(run) if isinstance(r, ast.Return)] if run else []
    return bool(rets) and all(_fresh(home, r.value) for r in rets)


def _fresh(ctx: Context, e: ast.AST | None) -> bool:
    """A tensor made anew (``torch.tensor(...)``), or a list/tuple/comprehension of them."""
    if isinstance(e, (ast.List, ast.Tuple)):
        return bool(e.elts) and all(_fresh(ctx, x) for x in e.elts)
    if isinstance(e, (ast.ListComp, ast.GeneratorExp)):
        return _fresh(ctx, e.elt)
    return isinstance(e, ast.Call) and ctx.qualified_name(e.func) in FRESH_LEAVES
