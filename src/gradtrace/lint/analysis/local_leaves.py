"""New leaves that require grad, and names that keep one to themselves.

# NOTE [made leaves]
A call makes a new leaf that requires grad when it is a tensor factory given
``requires_grad=True`` (``torch.rand(5, requires_grad=True)``), a factory's result given
``.requires_grad_()``, ``Variable(t, requires_grad=True)`` (a copy without history: checked on
torch 2.13), or a call of a function of the file that returns one of those made with its own
``requires_grad`` parameter, given ``True`` for it (HiMol's ``create_var(torch.rand(5), device,
requires_grad=True)`` returning ``Variable(tensor, requires_grad=requires_grad).to(device)``).
A device or dtype move after it (``.to(device)``, ``.cuda()``, ``.float()``) is the same value
for what trains it: no optimizer built earlier holds it. :func:`kept_local` says a name bound
to such a value in a function never leaves it: not returned as it is, not stored on an object
or in a container, not handed to a method of another object, not bound to another name, and its
``.grad`` is never read: what it receives is thrown away at the end of the call.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.facts import TENSOR_FACTORIES
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import walk

MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "type"})
VARIABLES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def _unmoved(e: ast.expr) -> ast.expr:
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in MOVES:
        e = e.func.value
    return e


def _rg(call: ast.Call) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == "requires_grad"), None)


def _true(e: ast.expr | None) -> bool:
    return isinstance(e, ast.Constant) and e.value is True


def _direct_leaf(v: ast.expr, ctx: Context, flag: str | None = None) -> bool:
    """A factory / ``Variable`` given ``requires_grad=True`` (or ``=flag``, a parameter)."""
    if not isinstance(v, ast.Call):
        return False
    f = v.func
    if flag is None and isinstance(f, ast.Attribute) and f.attr == "requires_grad_" \
            and not v.keywords and (not v.args or _true(v.args[0])):
        return (ctx.call_name(_unmoved(f.value)) or "") in TENSOR_FACTORIES
    name = ctx.call_name(v) or ""
    if name not in TENSOR_FACTORIES and name not in VARIABLES:
        return False
    rg = _rg(v)
    if rg is None and name in VARIABLES and len(v.args) > 1:
        rg = v.args[1]
    return _true(rg) if flag is None else isinstance(rg, ast.Name) and rg.id == flag


def _helper_leaf(call: ast.Call, ctx: Context) -> bool:
    """``make(t, requires_grad=True)``: a function of the file whose returns are all new
    tensors (factory / ``Variable`` calls, moved), one made with ``requires_grad=<flag>``."""
    if not isinstance(call.func, ast.Name):
        return False
    fn = ctx.analysis.functions.get(call.func.id)
    if not isinstance(fn, FUNCTION_TYPES):
        return False
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    passed = {params[i]: a for i, a in enumerate(call.args) if i < len(params)
              and not isinstance(a, ast.Starred)}
    passed.update({k.arg: k.value for k in call.keywords if k.arg})
    flags = [p for p, a in passed.items() if _true(a)]
    rets = [r.value for r in walk(fn) if isinstance(r, ast.Return)]
    if not flags or not rets or any(r is None for r in rets):
        return False
    made = [_unmoved(r) for r in rets]  # type: ignore[arg-type]
    if not all(isinstance(m, ast.Call) and ((ctx.call_name(m) or "") in TENSOR_FACTORIES
                                            or (ctx.call_name(m) or "") in VARIABLES)
               for m in made):
        return False
    return any(_direct_leaf(m, ctx, flag) for m in made for flag in flags)


def made_leaf(v: ast.expr, ctx: Context) -> bool:
    """Whether ``v`` makes a new leaf that requires grad (NOTE [made leaves])."""
    v = _unmoved(v)
    return _direct_leaf(v, ctx) or isinstance(v, ast.Call) and _helper_leaf(v, ctx)


def kept_local(name: str, bound: ast.AST, fn: ast.AST, ctx: Context) -> bool:
    """Whether the local ``name`` (bound by the statement ``bound``) never leaves ``fn``."""
    parents: dict[int, ast.AST] = {}
    for n in walk(fn):
        for c in ast.iter_child_nodes(n):
            parents[id(c)] = n
    for n in walk(fn):
        if not (isinstance(n, ast.Name) and n.id == name):
            continue
        if isinstance(n.ctx, ast.Store):
            if parents.get(id(n)) is not bound:
                return False  # bound twice: followed no further
            continue
        p = parents.get(id(n))
        while isinstance(p, (ast.Tuple, ast.List, ast.Starred)):
            p = parents.get(id(p))  # an element of a literal is the value itself
        if isinstance(p, (ast.Return, ast.Yield, ast.Assign, ast.AnnAssign, ast.AugAssign,
                          ast.NamedExpr, ast.Dict, ast.Set, ast.Lambda)):
            return False
        if isinstance(p, ast.Attribute):
            if p.attr in ("grad", "retain_grad", "register_hook"):
                return False
        elif isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) \
                and n is not p.func.value and not (ctx.call_name(p) or "").startswith("torch."):
            return False  # handed to another object's method (``store.append(w)``)
    return True
