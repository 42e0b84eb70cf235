"""GT403: a moved Parameter kept on a local name that only feeds the function's computation.

# NOTE [parameter spent in its function]
``weights = nn.Parameter(torch.empty(n, m)).cuda()`` inside a ``forward``, then only
``torch.matmul(x, weights)`` (and ``nn.init.xavier_normal_(weights)``): the value never
leaves the function: it is not stored on an object, returned, yielded, put in a container,
handed to an optimizer or to any callee but a torch function. Registered or not, moved or
not, nothing trains it (a new one is made on every call): the move changes nothing, and
GT403's consequences (an attribute not registered, an optimizer raising) cannot happen. The
rule is silent when every read of the name is an operand (``x @ w``, ``w * 2``) or an
argument of a ``torch`` function (not a class, nothing of ``torch.optim``); the value of an
in-place one (``nn.init.xavier_normal_(w)`` returns ``w``) may only be bound to local names,
which are followed the same way.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def spent_locally(node: ast.Call, ctx: Context) -> bool:
    """``node`` (``nn.Parameter(...).to(...)``) is bound to a local name of a function whose
    every read only computes with it there (NOTE [parameter spent in its function])."""
    fn, st = ctx.function, ctx.statement
    if fn is None or not (isinstance(st, ast.Assign) and st.value is node
                          and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
        return False
    parents = {id(c): p for p in walk(fn) for c in ast.iter_child_nodes(p)}
    names, todo = set(), [st.targets[0].id]
    while todo:
        name = todo.pop()
        if name in names:
            continue
        names.add(name)
        for n in walk(fn):
            if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
                return False
            if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
                continue
            use = _use(n, parents, ctx)
            if use is None:
                return False
            todo.extend(use)
    return True


def _use(n: ast.Name, parents: dict[int, ast.AST], ctx: Context) -> list[str] | None:
    """The local names the read ``n`` is copied to (empty: a computation only); None when
    the value may leave the function."""
    p = parents.get(id(n))
    if isinstance(p, ast.keyword):
        p = parents.get(id(p))
    if isinstance(p, (ast.BinOp, ast.UnaryOp, ast.Compare)):
        return []  # a new tensor computed from it
    if not isinstance(p, ast.Call) or p.func is n:
        return None
    q = ctx.qualified_name(p.func) or ""
    last = q.rpartition(".")[2]
    if not q.startswith("torch.") or q.startswith("torch.optim") or last[:1].isupper():
        return None
    if not last.endswith("_"):
        return []  # `torch.matmul(x, w)`: a new tensor
    top: ast.AST | None = p  # `nn.init.xavier_normal_(w)` returns `w` itself
    while top is not None and not isinstance(top, ast.stmt):
        top = parents.get(id(top))
    if isinstance(top, ast.Expr):
        return []
    if isinstance(top, ast.Assign) and all(isinstance(t, ast.Name) for t in top.targets):
        return [t.id for t in top.targets]  # type: ignore[attr-defined]
    return None
