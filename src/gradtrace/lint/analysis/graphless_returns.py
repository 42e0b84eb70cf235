"""Values that hold no autograd graph whatever they are computed from, and the functions of
the file whose every ``return`` gives back one.

# NOTE [graphless by construction]
Some results never carry a graph, whatever their inputs hold (checked on torch 2.13):

* text: a method of a string literal (``"".join(chars_of(ids))``, ``"{}".format(loss)``), an
  f-string: a Python ``str``;
* a Python number: ``.item()``/``.tolist()``, ``float(...)``/``len(...)``, arithmetic of those;
* a comparison (``out > 0.5``, ``pred.eq(y)``'s operator form): a bool tensor, whose
  ``requires_grad`` is False and which has no ``grad_fn``, even for an input that requires grad;
* a tensor method or ``torch.*`` function whose receiver and arguments are all such values
  (``(oss & tss).sum(axis=[1, 2])``, ``((inter + s) / (union + s)).mean()``): an operation
  on tensors that do not require grad records nothing (``requires_grad_`` aside);
* a NumPy function's result (``np.ones(shape) * 10``), a method of one, ``t.numpy()``,
  ``a.astype(dtype)``: an ndarray holds no autograd graph;
  ``torch.from_numpy(a)`` and ``torch.tensor(data)`` (no ``requires_grad=``) make a tensor
  without history whatever they are given;
* a dict, list or tuple of such values, a subscript of one.

A function of the file whose every ``return`` (at least one with a value) is such a value, a
name followed to every value the function binds it to (never a parameter, a loop or ``with``
target; a parameter only where it is known to hold no tensor, NOTE [known not a tensor]),
hands back no graph: an IoU computed from thresholded masks, a metrics dict of
``.item()`` numbers. GT505 (and the graph facts of GT505-GT509) read its calls as graphless.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.cuts import NON_VALUE_ATTRS, NUMBER_FUNCS
from gradtrace.lint.analysis.modules import DEFS
from gradtrace.lint.analysis.narrowed import no_tensor_at
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import bfs_walk

NUMBER_METHODS = frozenset({"item", "tolist", "numel", "dim", "ndimension", "nelement",
                            "size"})
# `t.numpy()` (an ndarray; raises on a tensor that requires grad), `a.astype(dtype)` (no
# tensor has `astype`): an ndarray, whatever the receiver held
ARRAY_METHODS = frozenset({"numpy", "astype"})
CONTAINERS = (ast.List, ast.Tuple, ast.Set)
# tensors made anew from data, without history whatever they are given
FRESH_LEAVES = frozenset({"torch.from_numpy", "torch.tensor"})


def text_method(call: ast.Call) -> bool:
    """``"".join(...)``, ``"{:.3f}".format(x)``: a method of a string literal gives text."""
    f = call.func
    return isinstance(f, ast.Attribute) and (isinstance(f.value, ast.JoinedStr) or isinstance(
        f.value, ast.Constant) and isinstance(f.value.value, str))


def returns_graphless(ctx: Context, fn: ast.AST | None) -> bool:
    """Every ``return`` of the function ``fn`` of the file gives back a value that holds no
    graph (NOTE [graphless by construction])."""
    if not isinstance(fn, DEFS):
        return False
    return ctx.memo("graphless-returns", fn, lambda: _returns_graphless(ctx, fn))


def plain_return(ctx: Context, fn: ast.AST | None) -> bool:
    """What ``fn`` returns is made with grad off (NOTE [no-grad helpers]) or holds no graph
    by construction (NOTE [graphless by construction])."""
    from gradtrace.lint.analysis.grad_off_returns import returns_off
    return returns_off(ctx, fn) is not None or returns_graphless(ctx, fn)


def graphless_call(ctx: Context, where: ast.AST, call: ast.Call) -> bool:
    """``call`` gives back a value without a graph: a Python number by
    :func:`.objects.number_call`, a function of the file every ``return`` of which is
    graphless (NOTE [graphless by construction]), or one fetched from a method that hands
    back such a function (NOTE [callable fetched from a method])."""
    from gradtrace.lint.analysis.objects import number_call
    if number_call(ctx, where, call):
        return True
    if returns_graphless(ctx, ctx.analysis.callee(call, where)):
        return True
    from gradtrace.lint.analysis.fetched_callables import fetched_graphless
    return fetched_graphless(  # NOTE [callable fetched from a method]
        ctx, where, call, returns_graphless)


def returned_element_graphless(ctx: Context, fn: ast.AST | None, i: int) -> bool:
    """Every ``return`` of ``fn`` gives back a tuple whose element ``i`` holds no graph
    (``return (total_loss, detections)`` with ``total_loss`` a sum of ``.item()`` numbers):
    a name unpacked from that position of its result is graphless
    (NOTE [graphless by construction])."""
    if not isinstance(fn, DEFS):
        return False
    rets = [r for r in bfs_walk(fn) if isinstance(r, ast.Return)]
    if not rets or not all(isinstance(r.value, ast.Tuple) and len(r.value.elts) > i
                           and not any(isinstance(e, ast.Starred) for e in r.value.elts)
                           for r in rets):
        return False
    ok = _graphless_test(ctx, fn)
    return all(ok(r.value.elts[i], r) for r in rets)  # type: ignore[union-attr]


def _returns_graphless(ctx: Context, fn: ast.AST) -> bool:
    rets = [r for r in bfs_walk(fn) if isinstance(r, ast.Return)]
    if not any(r.value is not None for r in rets):
        return False
    ok = _graphless_test(ctx, fn)
    return all(ok(r.value, r) for r in rets)


def _graphless_test(ctx: Context, fn: ast.AST) -> _Graphless:
    """The test ``ok(expr, stmt)``: ``expr`` read in ``fn`` holds no graph."""
    return _Graphless(ctx, fn)


class _Graphless:
    """:func:`_graphless_test`'s test (an object, not a recursive closure: NOTE [gc])."""

    def __init__(self, ctx: Context, fn: ast.AST) -> None:
        self.ctx, self.scope = ctx, ctx.scope(fn)
        self.params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}  # type: ignore
        self.seen: set[str] = set()

    def name_ok(self, name: str, at: ast.stmt) -> bool:
        scope, ctx, seen, ok = self.scope, self.ctx, self.seen, self
        if name in self.params:  # NOTE [known not a tensor]: handed back where it is none
            return not scope.bindings.get(name) and no_tensor_at(name, at, scope, ctx)
        if name in seen:
            return True  # a cycle (``x = x.sum()``): decided by its other values
        seen.add(name)
        bs = scope.bindings.get(name, ())
        return bool(bs) and all(b.value is not None and isinstance(  # (`n += x.item()`)
            b.stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and ok(b.value, b.stmt)
            for b in bs)

    def __call__(self, e: ast.AST | None, at: ast.stmt) -> bool:
        ctx, ok = self.ctx, self
        if e is None or isinstance(e, (ast.Constant, ast.JoinedStr, ast.Compare)):
            return True
        if isinstance(e, ast.Name):
            return self.name_ok(e.id, at)
        if isinstance(e, ast.BinOp):
            return ok(e.left, at) and ok(e.right, at)
        if isinstance(e, ast.UnaryOp):
            return ok(e.operand, at)
        if isinstance(e, ast.BoolOp):
            return all(ok(v, at) for v in e.values)
        if isinstance(e, ast.IfExp):
            return ok(e.body, at) and ok(e.orelse, at)
        if isinstance(e, CONTAINERS):
            return all(ok(v, at) for v in e.elts)
        if isinstance(e, ast.Dict):
            return all(ok(v, at) for v in e.values)
        if isinstance(e, ast.Subscript):
            return ok(e.value, at)
        if isinstance(e, ast.Attribute):
            return e.attr in NON_VALUE_ATTRS and e.attr != "grad"
        if isinstance(e, ast.Call):
            return _call_ok(ctx, e, lambda x: ok(x, at))
        return False


def _call_ok(ctx: Context, e: ast.Call, ok: object) -> bool:
    f = e.func
    if text_method(e):
        return True
    args = [*e.args, *(k.value for k in e.keywords)]
    if any(isinstance(a, ast.Starred) for a in e.args):
        return False
    q = ctx.qualified_name(f) or ""
    if q in NUMBER_FUNCS and q != "abs" or q.startswith("numpy.") or q in FRESH_LEAVES and not \
            any(k.arg == "requires_grad" for k in e.keywords):
        return True
    if isinstance(f, ast.Attribute):
        if f.attr in NUMBER_METHODS or f.attr in ARRAY_METHODS or isinstance(f.value, ast.Call) \
                and (ctx.qualified_name(f.value.func) or "").startswith("numpy."):
            return True  # an ndarray's method gives an ndarray (or a number), whatever it takes
        return f.attr != "requires_grad_" and ok(f.value) and all(  # type: ignore[operator]
            ok(a) for a in args)  # type: ignore[operator]
    return q.startswith("torch.") and not q.startswith(("torch.nn.", "torch.autograd.")) \
        and not any(k.arg == "requires_grad" for k in e.keywords) \
        and all(ok(a) for a in args)  # type: ignore[operator]

