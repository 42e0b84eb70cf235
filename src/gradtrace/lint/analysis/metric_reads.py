"""A call whose value its caller only turns into numbers: a metric, never differentiated.

# NOTE [read only as numbers]
RAFT's ``endpoint_error(flow_pred, flow_gt)`` is a square root of squared differences (GT753's
shape) called in a loss module's ``forward``, yet every use of what it returns ends in a
number or a comparison: ``epe = endpoint_error(...)`` then ``epe.mean().item()`` and ``(epe <
1).float().mean().item()``. ``.item()``/``.tolist()``/``float()`` give a Python number and a
comparison a bool tensor: none of them has a ``grad_fn``, so no backward ever reaches the root
through that call (an inf/NaN derivative there changes nothing). A call site counts as reading
only numbers when its value, through tensor methods, operators and subscripts, reaches only
those ends, directly or through a name bound once in the caller to exactly that call.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk

NUMBER_ENDS = frozenset({"item", "tolist", "detach"})
NUMBER_CASTS = frozenset({"float", "int", "bool"})


def unread_result(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    """The call's value is logged (:func:`.loss_evidence.logged_value`) or read only as
    numbers (NOTE [read only as numbers]): its caller never differentiates it."""
    from gradtrace.lint.analysis.loss_evidence import logged_value
    return logged_value(ctx, where, call) or read_as_numbers(ctx, where, call)


def read_as_numbers(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    """NOTE [read only as numbers]."""
    parents = file_parents(ctx)  # NOTE [one parent map]: the calling function's parents
    if _number_use(call, parents):
        return True
    st = parents.get(id(call))
    if not (isinstance(st, ast.Assign) and st.value is call and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)):
        return False
    name = st.targets[0].id
    if len(ctx.scope(where).bindings.get(name, ())) != 1:
        return False
    uses = [n for n in walk(where) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(_number_use(n, parents) for n in uses)


def _number_use(n: ast.AST, parents: dict[int, ast.AST]) -> bool:
    while True:
        p = parents.get(id(n))
        if isinstance(p, ast.Compare):
            return True
        if isinstance(p, ast.Call) and n in p.args and isinstance(p.func, ast.Name) \
                and p.func.id in NUMBER_CASTS:
            return True
        if isinstance(p, ast.Attribute) and p.value is n:
            call = parents.get(id(p))
            if not (isinstance(call, ast.Call) and call.func is p) or p.attr == "backward":
                return False
            if p.attr in NUMBER_ENDS:
                return True
            n = call  # a tensor method: follow what it gives back
            continue
        if isinstance(p, (ast.BinOp, ast.UnaryOp)) or isinstance(p, ast.Subscript) \
                and p.value is n:
            n = p
            continue
        return False
