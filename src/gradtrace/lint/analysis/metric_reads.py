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


def returned_as_metric(ctx: Context, fn: ast.AST, node: ast.AST) -> bool:
    """# NOTE [metric element of a returned tuple]
    A helper computes the loss and its metrics together and returns them as one tuple
    (``return loss, rmse, psnr``; a Lightning ``shared_step``, a metrics helper returning
    ``mse, rmse, bias, cc, kge``); each caller unpacks it (``loss, rmse, psnr =
    self.shared_step(...)``), backpropagates ``loss`` and reads ``rmse`` only as a number
    (``rmse.detach().item()``, ``rmse if isinstance(rmse, float) else rmse.item()``) or hands
    it to ``self.log``. The root bound to ``rmse`` then never meets a backward: the name holding
    ``node`` leaves ``fn`` only at positions of its returned tuples (or as numbers), every call
    of ``fn`` (in the file, and none in the project's other files: NOTE [reverse index]) unpacks
    it into names of the same length, and the name at each such position is read only so."""
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.analysis.callers import foreign_sites
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    parents = file_parents(ctx)
    st = ctx.scope(fn).statement_of(node)
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name) and any(n is node for n in walk(st.value))):
        return False
    name, positions = st.targets[0].id, set()
    for n in walk(fn):
        if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
            continue
        p = parents.get(id(n))
        if isinstance(p, ast.Tuple) and isinstance(parents.get(id(p)), ast.Return):
            positions.add((next(i for i, e in enumerate(p.elts) if e is n), len(p.elts)))
        elif not _read_as_number(n, name, parents):
            return False
    sites = function_sites(ctx.analysis, fn) if positions else None
    if not sites or foreign_sites(ctx, fn) != []:
        return False
    for call, maker in sites:
        s = parents.get(id(call))
        if not (isinstance(s, ast.Assign) and s.value is call and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Tuple)):
            return False
        elts = s.targets[0].elts
        for i, k in positions:
            if len(elts) != k or not isinstance(elts[i], ast.Name):
                return False
            got = elts[i].id
            uses = [u for u in walk(maker) if isinstance(u, ast.Name) and u.id == got
                    and isinstance(u.ctx, ast.Load)]
            if not all(_read_as_number(u, got, parents) for u in uses):
                return False
    return True


def _read_as_number(n: ast.Name, name: str, parents: dict[int, ast.AST]) -> bool:
    """``n`` (a read of ``name``) ends in a number (NOTE [read only as numbers]), is handed to
    ``self.log(...)``, is the type test of ``isinstance(name, float)``, or is the arm of
    ``name if isinstance(name, float|int) else ...`` that test picks (a number there)."""
    from gradtrace.lint.analysis.loss_evidence import LOG_METHODS
    if _number_use(n, parents):
        return True
    p = parents.get(id(n))
    if isinstance(p, ast.Call) and n in p.args and isinstance(p.func, ast.Attribute) \
            and p.func.attr in LOG_METHODS and isinstance(p.func.value, ast.Name) \
            and p.func.value.id == "self" and isinstance(parents.get(id(p)), ast.Expr):
        return True
    if isinstance(p, ast.Call) and isinstance(p.func, ast.Name) \
            and p.func.id == "isinstance" and p.args and p.args[0] is n:
        return True
    if isinstance(p, ast.IfExp) and p.body is n:
        t = p.test
        return isinstance(t, ast.Call) and isinstance(t.func, ast.Name) \
            and t.func.id == "isinstance" and len(t.args) == 2 \
            and isinstance(t.args[0], ast.Name) and t.args[0].id == name \
            and isinstance(t.args[1], ast.Name) and t.args[1].id in ("float", "int")
    return False
