"""Values that are surely views of another tensor, read without running anything.

# NOTE [sure views]
A tensor made by a view op shares its base's storage, and a few operations refuse a view
whatever its base: ``v.detach_()`` raises ``RuntimeError: Can't detach views in-place. Use
detach() instead.`` for every view, with grad on or off and whether the base requires grad or
not (checked on torch 2.13). :func:`sure_view` says a value is one only where torch always
makes a view: the view methods of :data:`VIEWS` (``view``, ``transpose``, ``permute``,
``unsqueeze``, ``squeeze``, ``expand``, ``select``...: ``x.squeeze()`` with nothing to squeeze
is a view too), ``.T``/``.mT``, a piece of ``split``/``chunk``/``unbind``, a basic index
(numbers and slices: ``x[0]``, ``x[:, 1]``) of a value that is surely a tensor, and a
``reshape`` of a tensor just made contiguous by a factory, ``torch.stack`` or ``torch.cat``
(pytorch3d's ``quaternion_to_matrix``: ``o = torch.stack(...); return o.reshape(...)``).
Not views, or not always: ``flatten`` (a 1-d tensor comes back as itself), ``reshape`` of
anything else (it copies when the strides forbid a view), ``.real`` of a real tensor (itself),
an index by a tensor or a mask (a copy), an element of a Python list or tuple: what
``torch.autograd.grad`` returns is a tuple, so ``grad(e, pos, create_graph=True)[0]`` is the
gradient tensor itself, and ``detach_()`` on it works (MoleculeSDE's force from an energy);
so are the results of :data:`NOT_ONE_TENSOR` (``torch.max(x, 1)``, ``torch.sort``...: a pair
or a tuple by some arguments) and of torch's submodules other than ``fft``/``special``
(``torch.linalg.qr``, ``torch.load``). Followed through the
names of one function (every binding of the name must be a sure view) and through a function
of the file whose every ``return`` is one.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.multi_views import MULTI_VIEW_OPS, VIEW_OF, _basic_index

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

VIEWS = VIEW_OF | {"as_strided", "unflatten", "view_as_real", "view_as_complex"}
# torch functions whose result is a new contiguous tensor (a reshape of it is a view)
CONTIGUOUS = frozenset({"stack", "cat", "concat", "zeros", "ones", "empty", "full", "rand",
                        "randn", "randint", "arange", "linspace", "eye", "tensor"})
TORCH_VIEWS = frozenset({"transpose", "permute", "unsqueeze", "squeeze", "narrow", "select",
                         "movedim", "swapaxes", "diagonal", "as_strided", "unflatten",
                         "view_as_real", "view_as_complex"})
MAX_DEPTH = 6
# torch functions whose result is (or, by some arguments, is) a tuple or a list of tensors, or
# no tensor: an index of it is an element, not a view (NOTE [sure views])
NOT_ONE_TENSOR = frozenset({
    "split", "chunk", "unbind", "split_with_sizes", "tensor_split", "hsplit", "vsplit",
    "dsplit", "sort", "topk", "max", "min", "kthvalue", "mode", "median", "nanmedian",
    "aminmax", "unique", "unique_consecutive", "where", "nonzero", "meshgrid",
    "broadcast_tensors", "atleast_1d", "atleast_2d", "atleast_3d", "svd", "qr", "lu",
    "slogdet", "std_mean", "var_mean", "frexp", "histogram", "lobpcg", "pca_lowrank",
    "svd_lowrank", "cummax", "cummin", "geqrf", "triangular_solve", "lstsq", "eig", "symeig",
    "load"})
# torch submodules whose functions return one tensor
TENSOR_SUBMODULES = ("fft.", "special.")


def sure_view(e: ast.AST, fn: ast.AST, ctx: Context, depth: int = 0) -> bool:
    """Whether ``e``, read in the function (or module) ``fn``, is surely a view
    (NOTE [sure views])."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(e, ast.Name):
        return _name(e.id, fn, ctx, lambda v: sure_view(v, fn, ctx, depth + 1))
    if isinstance(e, ast.Attribute):
        return e.attr in ("T", "mT", "H", "mH") and _tensor(e.value, fn, ctx, depth + 1)
    if isinstance(e, ast.Subscript):
        v = e.value
        if isinstance(v, ast.Call) and _split(v, ctx):
            return True  # `x.chunk(2)[0]`
        return _basic_index(e, names=False) and _tensor(v, fn, ctx, depth + 1)
    if not isinstance(e, ast.Call):
        return False
    f = e.func
    q = ctx.qualified_name(f) or ""
    if q.startswith("torch."):
        return q[6:] in TORCH_VIEWS and bool(e.args)
    if isinstance(f, ast.Attribute):
        if f.attr in VIEWS:
            return True  # a tensor method (the value is used as a tensor)
        if f.attr == "reshape":
            return _contiguous(f.value, fn, ctx, depth + 1)
        return False
    callee = ctx.analysis.callee(e, fn)
    return callee is not None and callee is not fn and ctx.memo(
        "sure-view-returns", callee, lambda: _returns_view(callee, ctx, depth + 1))


def _name(name: str, fn: ast.AST, ctx: Context, test) -> bool:  # type: ignore[no-untyped-def]
    """Every binding of ``name`` in ``fn`` is a one-name assignment whose value passes
    ``test`` (a loop may carry any of them to the read)."""
    bs = ctx.scope(fn).bindings.get(name)
    a = getattr(fn, "args", None)
    if not bs or a is not None and any(x.arg == name for x in (
            *a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None):
        return False  # (a parameter: what the caller passes)
    for b in bs:
        s = b.stmt
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Name) and b.value is not None):
            return False
        if not test(b.value):
            return False
    return True


def _split(call: ast.Call, ctx: Context) -> bool:
    f = call.func
    q = ctx.qualified_name(f) or ""
    if q.startswith("torch."):
        return q[6:] in MULTI_VIEW_OPS
    return isinstance(f, ast.Attribute) and f.attr in MULTI_VIEW_OPS


def _tensor(e: ast.AST, fn: ast.AST, ctx: Context, depth: int) -> bool:
    """``e`` is surely a tensor: a torch function's result, a view, a name bound to them."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(e, ast.Name):
        return _name(e.id, fn, ctx, lambda v: _tensor(v, fn, ctx, depth + 1))
    if isinstance(e, ast.Call) and (ctx.qualified_name(e.func) or "").startswith("torch."):
        return _one_tensor((ctx.qualified_name(e.func) or "")[6:])
    return sure_view(e, fn, ctx, depth)


def _one_tensor(name: str) -> bool:
    """``torch.<name>(...)`` surely returns one tensor: not a tuple-maker of
    :data:`NOT_ONE_TENSOR`, and a top-level function or one of ``torch.fft``/``torch.special``
    (``torch.autograd.grad`` returns a tuple, ``torch.nn`` builds layers)."""
    if "." in name:
        return name.startswith(TENSOR_SUBMODULES)
    return name not in NOT_ONE_TENSOR


def _contiguous(e: ast.AST, fn: ast.AST, ctx: Context, depth: int) -> bool:
    """``e`` is a tensor a factory, ``torch.stack`` or ``torch.cat`` just made."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(e, ast.Name):
        return _name(e.id, fn, ctx, lambda v: _contiguous(v, fn, ctx, depth + 1))
    if isinstance(e, ast.Call):
        q = ctx.qualified_name(e.func) or ""
        return q.startswith("torch.") and q[6:] in CONTIGUOUS
    return False


def _returns_view(fn: ast.AST, ctx: Context, depth: int) -> bool:
    """Every ``return`` of ``fn`` (one at least, none in a nested function) is a sure view."""
    found = False
    for n in ast.walk(fn):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fn:
            return False
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(n, ast.Return):
            if n.value is None or not sure_view(n.value, fn, ctx, depth):
                return False
            found = True
    return found
