"""Whether a value is already on the current CUDA device where a bare ``.cuda()`` moves it.

# NOTE [cuda of what is on cuda]
``Tensor.cuda()`` with no argument asks for the current CUDA device; a tensor already there is
returned itself, no copy and no graph node (torch 2.13: ``t.cuda() is t``). So
``inputs = Variable(data.data, requires_grad=True).cuda()`` after ``data = data.cuda()`` keeps
the leaf, and ``inputs.grad`` is filled (Lee et al.'s Mahalanobis detector, copied widely: the
batch goes to the GPU first, then ``Variable(data, volatile=True)``, then the leaf for the
input perturbation). ``Variable(x)``, ``x.data``, ``x.detach()`` and ``x[i]`` keep ``x``'s
device, so the value is followed back through them to the binding that moved it. Only the
bindings that may reach the read count (NOTE [binding policy]): a ``.cuda()`` in one ``if``
arm, or a binding from elsewhere later in the block, leaves the device unknown (and the
alarm stands: a CPU leaf copied by ``.cuda()`` is a non-leaf).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.reach import reaching

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

_KEEP_DEVICE_METHODS = frozenset({"detach", "detach_", "contiguous", "requires_grad_"})
_VARIABLE = "torch.autograd.Variable"


def bare_cuda(e: ast.AST) -> bool:
    """``x.cuda()`` with no argument (the current CUDA device)."""
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
        and e.func.attr == "cuda" and not e.args and not e.keywords


def _source(e: ast.expr, ctx: Context) -> ast.expr:
    """``e`` with the device-keeping wrappers taken off (``Variable(x)``, ``x.data``,
    ``x.detach()``, ``x[i]``)."""
    while True:
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Attribute) and e.attr == "data":
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in _KEEP_DEVICE_METHODS and not e.args:
            e = e.func.value
        elif isinstance(e, ast.Call) and e.args and ctx.call_name(e) == _VARIABLE:
            e = e.args[0]
        else:
            return e


def on_cuda_already(e: ast.expr, scope: Scope, ctx: Context, depth: int = 0) -> bool:
    """Whether ``e`` (read in ``scope``) is sure to be on the current CUDA device: it is
    itself a bare ``.cuda()``, or a name every binding of which that may reach the read is
    (through device-keeping wrappers). NOTE [cuda of what is on cuda] says why."""
    e = _source(e, ctx)
    if bare_cuda(e):
        return True
    if not isinstance(e, ast.Name) or depth > 4:
        return False
    use = scope.statement_of(e)
    if use is None:
        return False
    bs = reaching(scope, e.id, use.lineno, use)
    if not bs:
        return False
    for b in bs:
        v = b.value
        if v is None or b.stmt is use or not on_cuda_already(v, scope, ctx, depth + 1):
            return False
    return True
