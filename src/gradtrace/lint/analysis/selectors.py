"""Values that are read only to choose: compared, turned into indices, never differentiated.

A distance computed to pick the closest of several predicted modes (LaneGCN's `PredLoss`:
`dist.append(torch.sqrt(((reg - gt) ** 2).sum(1)))`, then `min_dist, min_idcs = dist.min(1)`
and the masks `min_dist < th`, `dist - min_dist > eps`) gets no gradient: a comparison's
result is boolean and an index carries none, so the derivative of the ops that made the value
is never evaluated. The walk follows the value forward through the names it is bound or
appended to (one function), and answers True only when every read is such a choice.
"""
from __future__ import annotations

import ast

from gradtrace.lint.flow import Scope
from gradtrace.lint.nodes import parent_map, walk

INDEX_OPS = frozenset({"argmin", "argmax", "argsort"})     # only indices come out
PAIR_OPS = frozenset({"min", "max", "sort", "topk", "kthvalue", "median"})  # (values, idx)
CUT_OPS = frozenset({"item", "tolist", "detach", "numpy"})
SHAPE_OPS = frozenset({"size", "dim", "numel"})    # only numbers about its shape come out
SHAPE_ATTRS = frozenset({"shape", "ndim"})
# NOTE [output never differentiated]
# An op whose output is only compared, made indices, read for its shape, or written into in
# place (`area = torch.softmax(x, 1)[:, 1]; area[area < 0.5] = 0;
# keep = torch.logical_not(area).float()`) is never on a backward path: nothing it saved is
# read, so a later in-place write into it raises nothing (checked on torch 2.13).
# NO_GRAD_OUT: ops whose result is boolean or integer, so never requires grad.
NO_GRAD_OUT = frozenset({"logical_not", "logical_and", "logical_or", "logical_xor", "nonzero",
                         "argwhere", "isnan", "isinf", "isfinite", "isclose", "eq", "ne", "gt",
                         "lt", "ge", "le", "bucketize", "searchsorted", "count_nonzero",
                         "bool", "long", "int", "byte"})
MAX_DEPTH = 4


def only_selects(scope: Scope, node: ast.AST) -> bool:
    """Whether the value of ``node`` (an expression of a statement of ``scope``) is only ever
    compared, turned into indices or cut, or read for its shape (``angle.size()[0]``), through
    the local names it is bound or appended to."""
    st = scope.statement_of(node)
    if st is not None and _compared_in_place(st, node):
        return True
    holder = _holder(st, node) if st is not None else None
    return holder is not None and _name_selects(scope, holder, st.lineno, 0)  # type: ignore


def _compared_in_place(st: ast.stmt, node: ast.AST) -> bool:
    """``node``'s value reaches a comparison within its own statement through operators,
    method calls on it and subscripts (``ok[i] = d.sqrt().min() >= eps``): a boolean comes
    out, whatever the statement does with it."""
    parents = parent_map(st)
    child, p = node, parents.get(id(node))
    while p is not None and p is not st:
        if isinstance(p, ast.Compare):
            return True
        if isinstance(p, (ast.BinOp, ast.UnaryOp)) or isinstance(p, ast.Subscript) and \
                p.value is child or isinstance(p, ast.Attribute) and p.value is child:
            child, p = p, parents.get(id(p))
            continue
        if isinstance(p, ast.Call) and p.func is child:
            child, p = p, parents.get(id(p))  # the method called on it
            continue
        return False
    return False


def _holder(st: ast.stmt, node: ast.AST) -> str | None:
    """The local name the statement puts ``node``'s value into: ``name = <... node ...>`` or
    ``name.append(<... node ...>)``."""
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(
            st.targets[0], ast.Name) and any(n is node for n in walk(st.value)):
        return st.targets[0].id
    if isinstance(st, ast.Expr) and isinstance(c := st.value, ast.Call) and isinstance(
            c.func, ast.Attribute) and c.func.attr == "append" and isinstance(
            c.func.value, ast.Name) and len(c.args) == 1 and any(
            n is node for n in walk(c.args[0])):
        return c.func.value.id
    return None


def _name_selects(scope: Scope, name: str, line: int, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    uses = scope.uses_after(name, line)
    if not uses:
        return False  # kept somewhere we do not see (returned at its own line, a global)
    for n in uses:
        st = scope.statement_of(n)
        if st is None or not _use_selects(scope, st, n, depth):
            return False
    return True


def _use_selects(scope: Scope, st: ast.stmt, n: ast.Name, depth: int) -> bool:
    parents = parent_map(st)
    child: ast.AST = n
    p = parents.get(id(n))
    while p is not None and p is not st:
        if isinstance(p, ast.Compare):
            return True  # a boolean comes out
        if isinstance(p, ast.Subscript) and p.slice is child:
            return True  # used as an index or a mask
        if isinstance(p, ast.Subscript) and p.value is child and isinstance(p.ctx, ast.Store):
            return True  # `area[mask] = 0`: written into, not read
        if isinstance(p, ast.Call) and any(a is child for a in p.args) and isinstance(
                p.func, ast.Attribute) and isinstance(p.func.value, ast.Name) and \
                p.func.value.id == "torch" and p.func.attr in NO_GRAD_OUT | INDEX_OPS:
            return True  # `torch.nonzero(x)`: only a boolean or indices come out
        if isinstance(p, ast.Attribute) and p.value is child and p.attr in SHAPE_ATTRS:
            return True  # its shape is read, not its values
        if isinstance(p, ast.Attribute) and p.value is child and p.attr == "indices" \
                and isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) \
                and child.func.attr in PAIR_OPS:
            return True  # `torch.sort(d + pad, dim=2).indices`: only the order comes out
        if isinstance(p, ast.Attribute) and isinstance(parents.get(id(p)), ast.Call) \
                and parents[id(p)].func is p and p.value is child:  # type: ignore[attr-defined]
            if p.attr in INDEX_OPS | CUT_OPS | SHAPE_OPS | NO_GRAD_OUT:
                return True
            if p.attr == "append" and child is n:
                return True  # written into, not read
        child, p = p, parents.get(id(p))
    if isinstance(st, ast.Assign) and len(st.targets) == 1:
        t = st.targets[0]
        if isinstance(t, ast.Name):  # a value computed from it: follow that name
            return _name_selects(scope, t.id, st.lineno, depth + 1)
        v = st.value
        if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[0], ast.Name) \
                and isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                and v.func.attr in PAIR_OPS and v.func.value is n:
            return _name_selects(scope, t.elts[0].id, st.lineno, depth + 1)  # the values
    return False


def only_indices(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether ``node``'s value reaches its statement only as indices or a boolean: it is the
    receiver of ``argmax``/``argsort``/..., compared, or the tensor of a ``(values, indices)``
    op whose indices alone are taken (``x.max(1)[1]``, ``torch.max(x, 1)[1]``); ``parents``
    maps each node of the statement to its parent. The ops between may keep the value's kind
    (``x.data.cpu().max(1)[1]``)."""
    child, p = node, parents.get(id(node))
    while p is not None:
        if isinstance(p, ast.Compare):
            return True
        if isinstance(p, ast.Attribute) and p.value is child:
            call = parents.get(id(p))
            if not (isinstance(call, ast.Call) and call.func is p):
                return False
            if p.attr in INDEX_OPS:
                return True
            if p.attr in PAIR_OPS:
                return _second_of(call, parents)
            child, p = call, parents.get(id(call))
            continue
        if isinstance(p, ast.Call) and child in p.args[:1] and isinstance(p.func, ast.Attribute) \
                and isinstance(p.func.value, ast.Name) and p.func.value.id == "torch":
            if p.func.attr in INDEX_OPS:
                return True
            if p.func.attr in PAIR_OPS:
                return _second_of(p, parents)
        return False
    return False


def _second_of(call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    """``call(...)[1]``: the indices of a (values, indices) pair (``max``/``min`` need a dim:
    without one they return a single tensor)."""
    s = parents.get(id(call))
    return bool(call.args or call.keywords) and isinstance(s, ast.Subscript) \
        and s.value is call and isinstance(s.slice, ast.Constant) and s.slice.value == 1
