"""GT409 across a loop over the parameters: ``nn.Parameter(t)`` made from each parameter a
module already holds.

# NOTE [parameters re-wrapped]
A function that walks ``module.named_parameters()`` (or ``parameters()``) and registers a new
``nn.Parameter`` made from each one (sharded, cast, quantized: torchtitan's
``_spmd_distribute_state``) sets every new Parameter's ``requires_grad`` to True, whatever the
old one's was: in a file that freezes parameters (a ``requires_grad_(False)`` call or a
``.requires_grad = False``), the frozen ones come back trainable. The value wrapped is followed
back through its rebindings by calls given it (``t = distribute(t, mesh)``, ``t.to(dtype)``)
to the loop's target, or by a call written inside the Parameter call
(``nn.Parameter(distribute_tensor(p, mesh))``: torchtitan#3885), in the same function or, for a
parameter of the function, at every call site of the file. The loop may walk the parameters
through ``list``/``dict``, ``.items()``/``.values()`` or a name bound to one of those
(``params = dict(mod.named_parameters()); for n, p in params.items()``). Passing ``requires_grad=`` (the old flag) is the fix and silences it.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.callees import function_sites
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk

PARAM_ITERS = frozenset({"parameters", "named_parameters"})
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def file_freeze(ctx: Context) -> int | None:
    """The first line of the file that freezes a parameter or a module: ``x.requires_grad_(
    False)`` or ``x.requires_grad = False``."""
    def make() -> int | None:
        for n in walk(ctx.tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr == "requires_grad_" and n.args \
                    and isinstance(n.args[0], ast.Constant) and n.args[0].value is False:
                return n.lineno
            if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in n.targets) \
                    and isinstance(n.value, ast.Constant) and n.value.value is False:
                return n.lineno
        return None
    return ctx.memo("gt409-file-freeze", ctx.tree, make) if ctx.mentions("requires_grad") \
        else None


def rewrapped_loop(node: ast.Call, ctx: Context) -> ast.AST | None:
    """The ``for`` over a module's parameters whose target the Parameter call ``node`` wraps
    (NOTE [parameters re-wrapped]), or None."""
    fn = ctx.function
    if not node.args or not isinstance(fn, DEFS) or not _registered(node, ctx):
        return None
    return _origin(node.args[0], ctx, fn, node.lineno, 0)


def _registered(node: ast.Call, ctx: Context) -> bool:
    """The new Parameter replaces one on a module: ``register_parameter(name, P)``,
    ``setattr(m, name, P)`` or ``m.<attr> = P``."""
    p = ctx.parent
    if isinstance(p, ast.Call) and node in p.args:
        f = p.func
        return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in (
            "register_parameter", "setattr")
    s = ctx.statement
    return isinstance(s, ast.Assign) and s.value is node and len(s.targets) == 1 \
        and isinstance(s.targets[0], ast.Attribute)


def _strip(e: ast.AST) -> ast.AST:
    """``p.data``, ``p.detach().to(dtype)``...: the same values, without the casts."""
    while isinstance(e, ast.Attribute) and e.attr == "data" or isinstance(e, ast.Call) \
            and isinstance(e.func, ast.Attribute) and e.func.attr in (
                "detach", "clone", "to", "float", "half", "double", "bfloat16", "contiguous") \
            and not (isinstance(e.func.value, ast.Name) and e.func.value.id == "torch"):
        e = e.value if isinstance(e, ast.Attribute) else e.func.value  # type: ignore[union-attr]
    return e


def _params_iter(it: ast.AST, scope: object, line: int) -> ast.AST:
    """The ``named_parameters()`` call a loop walks, through ``list(...)``, ``dict(...)``,
    ``.items()``/``.values()`` and a name bound once to one of those
    (``params = dict(mod.named_parameters()); for n, p in params.items()``)."""
    for _ in range(4):
        if isinstance(it, ast.Call) and getattr(it.func, "id", "") in ("list", "dict",
                                                                          "tuple") and it.args:
            it = it.args[0]
        elif isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                and it.func.attr in ("items", "values") and not it.args:
            it = it.func.value
        elif isinstance(it, ast.Name):
            b = scope.binding_before(it.id, line)  # type: ignore[attr-defined]
            if b is None or not isinstance(b.stmt, ast.Assign) or b.value is None:
                return it
            it = b.value
        else:
            break
    return it


def _origin(e: ast.AST, ctx: Context, fn: ast.AST, line: int, depth: int) -> ast.AST | None:
    if depth > 4:
        return None
    e = _strip(e)
    if isinstance(e, ast.Call) and e.args and isinstance(_strip(e.args[0]), ast.Name):
        e = _strip(e.args[0])  # `distribute_tensor(p, mesh)` written in the call
    if not isinstance(e, ast.Name):
        return None
    scope = ctx.scope(fn)
    b = scope.binding_before(e.id, line)
    if b is not None and isinstance(b.stmt, (ast.For, ast.AsyncFor)):
        it = _params_iter(b.stmt.iter, scope, b.line)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) \
                and it.func.attr in PARAM_ITERS \
                and "requires_grad" not in ctx.code_of(b.stmt):  # no `if p.requires_grad:`
            return b.stmt
        return None
    if b is not None and isinstance(b.stmt, ast.Assign) and isinstance(_strip(b.value), ast.Name):
        return _origin(b.value, ctx, fn, b.line, depth + 1)  # `t = p.detach().double()`
    if b is not None and isinstance(b.stmt, ast.Assign) and isinstance(b.value, ast.Call):
        v = b.value  # `t = distribute(t, mesh)`: a call given the name itself
        given = [a for a in (*v.args, *(k.value for k in v.keywords))
                 if isinstance(a, ast.Name) and a.id == e.id]
        if isinstance(v.func, ast.Attribute) and isinstance(v.func.value, ast.Name) \
                and v.func.value.id == e.id:
            given.append(v.func.value)
        return _origin(given[0], ctx, fn, b.line, depth + 1) if given else None
    if b is not None or not isinstance(fn, DEFS):
        return None
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    if e.id not in params:
        return None
    sites = function_sites(ctx.analysis, fn)  # a parameter: what every caller passes
    if not sites:
        return None
    found = None
    for call, where in sites:
        arg = ctx.analysis.arguments(fn, call).get(e.id)
        got = _origin(arg, ctx, where, call.lineno, depth + 1) if arg is not None \
            and isinstance(where, DEFS) else None
        if got is None:
            return None
        found = found or got
    return found
