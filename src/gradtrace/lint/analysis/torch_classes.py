"""Whether a call builds torch's own class, or a class of the project spelled the same.

``utils.ReduceLROnPlateau(optimizer, ...)`` with ``import misc.utils as utils`` builds the
project's class (AoANet's wrapper, whose ``step()`` steps the optimizer and whose
``scheduler_step(val)`` steps torch's scheduler): a claim about what torch's class does with
its calls is not a claim about it. A bare name that no import binds (``from
torch.optim.lr_scheduler import *``) is taken for torch's; a class the file defines is the
file's, unless it derives from torch's.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.modules import AUTOGRAD_FUNCTION_BASES
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import statements

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


def builds_torch_class(ctx: Context, call: ast.Call, name: str) -> bool:
    """``call`` builds torch's class ``name`` (``ReduceLROnPlateau``), not another module's
    class of the same name."""
    q = ctx.qualified_name(call.func) or ""
    if q != name and not q.endswith("." + name):
        return False
    if q.startswith("torch."):
        return True
    if q != name:
        return False  # `utils.ReduceLROnPlateau`, `from sched import ReduceLROnPlateau`
    spelled = dotted(call.func)
    if spelled in ctx.imports.package:
        return False  # `from .utils import ReduceLROnPlateau`
    own = [s for s in statements(ctx.tree) if isinstance(s, ast.ClassDef) and s.name == name]
    return not own or any((ctx.qualified_name(b) or "").startswith("torch.")
                          for s in own for b in s.bases)


OPTIMIZER_BASES = frozenset({"torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"})
DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.IterableDataset",
                           "torch.utils.data.dataset.Dataset",
                           "torch.utils.data.dataset.IterableDataset"})


def optimizer_subclass(cls: ast.ClassDef | None, ctx: Context, depth: int = 0) -> bool:
    """A subclass of ``torch.optim.Optimizer`` (directly or through classes of the file)."""
    return _derives(cls, ctx, OPTIMIZER_BASES, depth)


def _derives(cls: ast.ClassDef | None, ctx: Context, bases: frozenset[str],
             depth: int = 0) -> bool:
    if cls is None or depth > 8:
        return False
    for b in cls.bases:
        if (ctx.qualified_name(b) or "") in bases:
            return True
        if isinstance(b, ast.Name):
            info = ctx.analysis.classes.get(b.id)
            if info is not None and info.node is not cls \
                    and _derives(info.node, ctx, bases, depth + 1):
                return True
    return False


def dataset_method(ctx: Context, fn: ast.AST | None) -> bool:
    """``fn`` is a method of a ``torch.utils.data.Dataset`` subclass (directly or through
    classes of the file): it prepares samples for a ``DataLoader`` (DGN's SBMs dataset
    normalising a graph's adjacency in its ``collate``), and nothing it computes is
    differentiated."""
    info = ctx.analysis.class_of(fn)
    return info is not None and _derives(info.node, ctx, DATASET_BASES)


def autograd_backward(ctx: Context, fn: ast.AST | None) -> bool:
    """``fn`` is the ``backward`` (or ``vjp``) of a ``torch.autograd.Function`` subclass
    (directly or through classes of the file). Torch runs it with grad mode set to the
    caller's ``create_graph``: off for an ordinary ``loss.backward()``, so nothing it computes
    is recorded or differentiated (entmax's ``where(Y > 0, Y * log(Y), 0)`` in the gradient
    of alpha; checked on torch 2.13); only a double backward records it."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or fn.name not in ("backward", "vjp"):
        return False
    info = ctx.analysis.class_of(fn)
    return info is not None and _derives(info.node, ctx, AUTOGRAD_FUNCTION_BASES)


def gradless_optimizer(ctx: Context, scope: object, name: str, line: int) -> bool:
    """The optimizer ``name`` (read at ``line``) is an object of a class of the project (this
    file or another, NOTE [project index]) that derives from torch's ``Optimizer`` alone and
    defines a ``step`` that applies no gradient: no method reads any ``.grad`` and ``step``
    runs no ``super().step()``. A K-FAC preconditioner gathering curvature from hooks is one
    (last_layer_laplace's ``KFAC(net)``): ``.grad`` left to add up changes nothing it does."""
    b = scope.binding_before(name, line)  # type: ignore[attr-defined]
    v = b.value if b is not None else None
    if not isinstance(v, ast.Call):
        return False
    cctx, cls = ctx, None
    if isinstance(v.func, ast.Name) and v.func.id in ctx.analysis.classes:
        cls = ctx.analysis.classes[v.func.id].node
    else:
        from gradtrace.lint.analysis.project import foreign_def
        got = foreign_def(ctx, v.func)
        if got is not None and isinstance(got[1], ast.ClassDef):
            cctx, cls = got
    if not isinstance(cls, ast.ClassDef) or not cls.bases or any(
            (cctx.qualified_name(x) or "") not in OPTIMIZER_BASES for x in cls.bases):
        return False
    if not any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == "step"
               for m in cls.body):
        return False
    return not any(isinstance(n, ast.Attribute) and (n.attr == "grad" or n.attr == "step" and (
        isinstance(n.value, ast.Call) and dotted(n.value.func) == "super")) for n in ast.walk(cls))
