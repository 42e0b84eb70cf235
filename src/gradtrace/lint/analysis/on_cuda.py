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

_KEEP_DEVICE_METHODS = frozenset({"detach", "detach_", "contiguous", "requires_grad_", "clone"})
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
                and e.func.attr in _KEEP_DEVICE_METHODS and (
                    not e.args or e.func.attr == "requires_grad_" and len(e.args) == 1):
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
        return _passed_on_cuda(e.id, scope, ctx, depth)
    for b in bs:
        v = b.value
        if v is None or b.stmt is use or not on_cuda_already(v, scope, ctx, depth + 1):
            return False
    return True


def _passed_on_cuda(name: str, scope: Scope, ctx: Context, depth: int) -> bool:
    """# NOTE [handed in on cuda]
    ``def fast_pgd(self, x_batch, y, n): x = x_batch.clone().detach().requires_grad_(True).cuda()``
    with ``x_batch`` a parameter the function never rebinds: the batch is on the current CUDA
    device when every call of the function passes one there (``x = x.cuda()``, then
    ``self.fast_pgd(x, y, 100)``), and ``.cuda()`` returns the leaf itself. Every call: the
    file's calls (at least one, each passing the argument) and none in the project's other
    files (the reverse index answers, and finds no call); each argument is judged where it is
    passed, as a name read there is."""
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.analysis.callers import _method_sites, foreign_sites
    fn = scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    names = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    method = ctx.analysis.class_of(fn) is not None
    if name not in names and name not in {a.arg for a in fn.args.kwonlyargs}:
        return False
    here = _method_sites(ctx, fn.name) if method else function_sites(ctx.analysis, fn)
    away = foreign_sites(ctx, fn)
    if here is None or away is None:
        return False
    sites = [(ctx, c, w) for c, w in here] + [(s.ctx, s.call, s.where) for s in away]
    pos = names.index(name) - method if name in names else None
    for octx, call, where in sites:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
                k.arg is None for k in call.keywords):
            return False
        v = next((k.value for k in call.keywords if k.arg == name), None)
        if v is None and pos is not None and 0 <= pos < len(call.args):
            v = call.args[pos]
        if v is None or not on_cuda_already(v, octx.scope(where), octx, depth + 1):
            return False
    return bool(sites)


# NOTE [moved where it already is]
# ``Tensor.to(device)`` to the device the tensor is on (or ``.to(dtype)`` to its dtype) returns
# the tensor itself (no copy, no graph node). ``noise = Variable(buf[:n], requires_grad=True).to(device)`` after
# ``buf = torch.zeros(...).to(device)`` keeps the leaf, and ``noise.grad`` is filled (free
# adversarial training: the global noise buffer is moved once, each batch's slice is made a
# leaf). As for ``.cuda()`` (NOTE [cuda of what is on cuda]), the value is followed back through
# device-keeping wrappers to bindings that all end in ``.to(D)`` with the same ``D``: one
# positional argument spelled alike (a name, an attribute, a constant), a name ``D`` with the
# same bindings reaching both moves. A ``.to`` with keywords or another argument, a binding
# elsewhere: unknown, the alarm stands.


def moved_already(move: ast.Call, factory: ast.Call, ctx: Context) -> bool:
    """``Variable(x, requires_grad=True).to(D)`` (``move``, ``factory``) where ``x`` is sure
    to be on ``D`` already (NOTE [moved where it already is])."""
    if not (isinstance(move.func, ast.Attribute) and move.func.attr == "to"
            and len(move.args) == 1 and not move.keywords and factory.args
            and ctx.call_name(factory) == _VARIABLE):
        return False
    device = move.args[0]
    if not isinstance(device, (ast.Name, ast.Attribute, ast.Constant)):
        return False
    scope = ctx.scope()
    use = scope.statement_of(move)
    return use is not None and _on_device(factory.args[0], device, use, scope, ctx, 0)


def _on_device(e: ast.expr, device: ast.expr, use: ast.stmt, scope: Scope, ctx: Context,
               depth: int) -> bool:
    e = _source(e, ctx)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "to" \
            and len(e.args) == 1 and not e.keywords \
            and ast.dump(e.args[0]) == ast.dump(device):
        where = scope.statement_of(e)
        return where is not None and _same_device(device, where, use, scope)
    if not isinstance(e, ast.Name) or depth > 4:
        return False
    at = scope.statement_of(e)
    bs = reaching(scope, e.id, at.lineno, at) if at is not None else []
    return bool(bs) and all(b.value is not None and b.stmt is not at and _on_device(
        b.value, device, use, scope, ctx, depth + 1) for b in bs)


def _same_device(device: ast.expr, a: ast.stmt, b: ast.stmt, scope: Scope) -> bool:
    """``device`` means the same at the statements ``a`` and ``b``: a constant, or a name (or
    the root of an attribute) whose reaching bindings are the same at both."""
    root = device
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Constant):
        return True
    if not isinstance(root, ast.Name):
        return False
    if root.id == "self":
        return True
    ids = [{id(x.stmt) for x in reaching(scope, root.id, s.lineno, s)} for s in (a, b)]
    return ids[0] == ids[1]
