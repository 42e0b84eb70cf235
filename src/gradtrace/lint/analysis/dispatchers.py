"""Type-dispatch helpers: the returns of a function that are not the tensor path.

# NOTE [type-dispatch helpers]
``def detach_to_cpu(x): if isinstance(x, Tensor): return x.detach().cpu(); if isinstance(x,
Sequence): return [detach_to_cpu(t) for t in x]; if isinstance(x, dict): return {k:
detach_to_cpu(v) for k, v in x.items()}; return x`` detaches every tensor it is given, at any
depth of lists and dicts: a generic utility (Lightning's ``apply_to_collection``, ride's
``detach_to_cpu``, the ``to_cpu``/``detach_all`` of many trainers). Read plainly, its last
``return x`` hands an argument back (live) and its comprehensions call a function not yet
known to cut, so it would not count as a helper cut (NOTE [helper cuts]). Two readings fix
that: a ``return p`` of a parameter that an earlier top-level ``if isinstance(p, Tensor):``
of the function (whose body ends in a ``return``) has already taken away is no tensor, so no
path; and a return that only rebuilds a container from recursive calls of the function itself
(a list, set, tuple or generator comprehension whose element is that call, a dict
comprehension whose value is) is as cut as the other returns, by induction on the depth of the
container. Such a helper is right by design; what is wrong is handing it the loss, so its cut
is reported at the call (as a cut in another file is), not at the helper's own line.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Def = ast.FunctionDef | ast.AsyncFunctionDef
TENSOR_TYPES = frozenset({"torch.Tensor", "torch.nn.Parameter"})


def dispatch_returns(ctx: Context, fn: Def) -> frozenset[int] | None:
    """The ids of ``fn``'s returns that are not its tensor path: a parameter handed back
    after the tensor test took tensors away, and containers rebuilt from recursive calls;
    None when ``fn`` has no ``isinstance(p, Tensor)`` test that returns
    (NOTE [type-dispatch helpers])."""
    return ctx.memo("dispatch-returns", fn, lambda: _dispatch(ctx, fn))


def _dispatch(ctx: Context, fn: Def) -> frozenset[int] | None:
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args)}
    tested: set[str] = set()
    out: set[int] = set()
    for st in fn.body:
        if isinstance(st, ast.If) and st.body and isinstance(st.body[-1], ast.Return):
            p = _tensor_test(ctx, st.test)
            if p in params:
                tested.add(p)
        if isinstance(st, ast.Return) and isinstance(st.value, ast.Name) \
                and st.value.id in tested:
            out.add(id(st))
    if not tested:
        return None
    for st in ast.walk(fn):
        if isinstance(st, ast.Return) and st.value is not None and _rebuilt(st.value, fn):
            out.add(id(st))
    return frozenset(out)


def _tensor_test(ctx: Context, test: ast.expr) -> str | None:
    """``p`` of ``isinstance(p, torch.Tensor)`` (or of a tuple of tensor types)."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id == "isinstance" and len(test.args) == 2
            and isinstance(test.args[0], ast.Name)):
        return None
    kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    if all((ctx.qualified_name(k) or "") in TENSOR_TYPES for k in kinds):
        return test.args[0].id
    return None


def _rebuilt(e: ast.expr, fn: Def) -> bool:
    """``e`` rebuilds a container from recursive calls of ``fn`` only."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and len(e.args) == 1 \
            and not e.keywords and e.func.id in ("list", "tuple", "set", "dict"):
        e = e.args[0]
    elif isinstance(e, ast.Call) and isinstance(e.func, ast.Call) and len(e.args) == 1:
        e = e.args[0]  # `type(x)(detach(t) for t in x)`
    if isinstance(e, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        item = e.elt
    elif isinstance(e, ast.DictComp):
        item = e.value
    else:
        return False
    return isinstance(item, ast.Call) and _self_call(item, fn)


def _self_call(c: ast.Call, fn: Def) -> bool:
    d = dotted(c.func)
    return d == fn.name or d == "self." + fn.name
