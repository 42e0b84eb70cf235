"""Values that surely carry no graph where they are read: data.

# NOTE [graphless data]
A value is data at a line when the flow's kinds (:mod:`gradtrace.lint.flow_kinds`) read it as a
new tensor or a detached one (``torch.randn(...)``, ``t.detach()``, ``torch.cos(x)`` of such)
and nothing it is computed from (its names, followed through their plain bindings, stopping at
``.detach()`` and ``.data``) is asked to require grad before it is computed: not by
``requires_grad=True``/``requires_grad_()`` in a binding, not by ``x.requires_grad = True`` /
``x.requires_grad_()`` at or before the line the value reads ``x``, nor inside a loop around
that read (a later pass would see the flag). ``z = (5 * torch.cos(x)).sum(-1)`` with ``x =
torch.randn(...)`` is data even when ``x.requires_grad = True`` follows in the training loop.
GT206 reads it: a gradient without a graph compared with data by a torch loss is the
prediction, so the term is a constant.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.flow import DETACHED, LEAF, Scope
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def graphless_data(a: ast.expr, scope: Scope, line: int) -> bool:
    """``a`` is data with no graph where line ``line`` reads it (NOTE [graphless data])."""
    if scope.kind(a, line) not in (LEAF, DETACHED):
        return False
    names = _made_from(a, scope, line, 0)
    if names is None or _asks_grad(a):
        return False
    for s in walk(scope.node):
        target = _requires_grad_target(s)
        if target is None or target[0] not in names:
            continue
        made = names[target[0]]
        if target[1] <= made or any(lo <= made <= hi for lo, hi in _loops_around(
                scope.node, target[1])):
            return False
    return True


def _made_from(e: ast.AST, scope: Scope, line: int, depth: int) -> dict[str, int] | None:
    """The names ``e`` is computed from, through their bindings before ``line``, each with the
    line where it is read (None: a binding that is not a plain assignment)."""
    out: dict[str, int] = {}
    if depth > 6:
        return None
    for n in _unless_cut(e):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            b = scope.binding_before(n.id, line)
            if b is None:
                continue
            if not isinstance(b.stmt, (ast.Assign, ast.AnnAssign)) or b.value is None \
                    or _asks_grad(b.value):
                return None
            out[n.id] = min(out.get(n.id, line), line)
            inner = _made_from(b.value, scope, b.line, depth + 1)
            if inner is None:
                return None
            for k, v in inner.items():
                out[k] = min(out.get(k, v), v)
    return out


def _unless_cut(e: ast.AST) -> list[ast.AST]:
    """The nodes of ``e`` outside ``.detach()`` calls and ``.data`` reads (what is cut there
    carries no graph whatever it is made from)."""
    out: list[ast.AST] = []
    todo = [e]
    while todo:
        n = todo.pop()
        out.append(n)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "detach" or isinstance(n, ast.Attribute) and n.attr == "data":
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


def _asks_grad(e: ast.AST) -> bool:
    """``torch.zeros(3, requires_grad=True)``, ``t.requires_grad_()``: a leaf that trains."""
    return any(isinstance(n, ast.keyword) and n.arg == "requires_grad"
               or isinstance(n, ast.Attribute) and n.attr == "requires_grad_"
               for n in _unless_cut(e))


def _requires_grad_target(s: ast.AST) -> tuple[str, int] | None:
    """(name, line) of ``name.requires_grad = ...`` or ``name.requires_grad_(...)``."""
    if isinstance(s, ast.Assign):
        for t in s.targets:
            if isinstance(t, ast.Attribute) and t.attr == "requires_grad" \
                    and isinstance(t.value, ast.Name):
                return t.value.id, s.lineno
    if isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) \
            and s.func.attr == "requires_grad_" and isinstance(s.func.value, ast.Name):
        return s.func.value.id, s.lineno
    return None


def _loops_around(fn: ast.AST, line: int) -> list[tuple[int, int]]:
    return [(n.lineno, n.end_lineno or n.lineno) for n in walk(fn)
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
            and n.lineno <= line <= (n.end_lineno or n.lineno)]


def returns_data(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every ``return`` of ``fn`` (a function of the file) gives data with no graph
    (NOTE [graphless data]; each element of a returned tuple): a helper handed a model that
    runs it only to read numbers (``values = net(x).data.cpu().numpy()``) and returns new
    tensors made of them (``torch.FloatTensor(adv).to(device)``: the GAE advantages of an
    actor-critic) hands back none of its graph."""
    def make() -> bool:
        scope = ctx.scope(fn)
        rets = [r for r in walk(fn) if isinstance(r, ast.Return)]
        if not rets or any(r.value is None for r in rets):
            return False
        parts = [(e, r.lineno) for r in rets for e in (
            r.value.elts if isinstance(r.value, ast.Tuple) else (r.value,))]
        return all(graphless_data(e, scope, line) for e, line in parts)  # type: ignore[arg-type]
    return ctx.memo("returns-data", fn, make)


def asked_grad(scope: Scope, name: str, line: int) -> bool:
    """``name.requires_grad = ...`` / ``name.requires_grad_(...)`` runs after ``name``'s last
    binding before ``line`` and before ``line`` (``x = inp.detach()``, then
    ``x.requires_grad = True``: a leaf that requires grad, whatever it was cut from)."""
    b = scope.binding_before(name, line)
    start = b.line if b is not None else 0
    for s in walk(scope.node):
        target = _requires_grad_target(s)
        if target is not None and target[0] == name and start <= target[1] < line \
                and not _switched_off(s):
            return True
    return False


def _switched_off(s: ast.AST) -> bool:
    """``x.requires_grad = False`` / ``x.requires_grad_(False)``."""
    v = s.value if isinstance(s, ast.Assign) else (
        s.args[0] if isinstance(s, ast.Call) and s.args else None)
    return isinstance(v, ast.Constant) and not v.value
