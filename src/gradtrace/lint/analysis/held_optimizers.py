"""Optimizers an object holds on an attribute that nothing in the file ever steps.

# NOTE [a held optimizer never stepped]
A trainer class often builds its optimizer in ``__init__`` (``self.optimizer =
torch.optim.SGD(...)``) and runs one batch per call of a method (``train_batch``,
``training_step``), called in a loop elsewhere. The loop then lives in another function than
the ``zero_grad``/``backward`` pair, and the optimizer is an attribute chain, not a local
name; both hide it from a reading that looks for the loop in the clearing function. The facts
that decide it are the same, read over the file: the method clears ``self.<opt>`` and fills
``.grad``, it is called inside a loop of the file, and every read of ``<...>.<opt>`` anywhere
in the file is one of the optimizer's own methods (``zero_grad``, ``state_dict``...) or the
optimizer handed to a ``torch.optim.lr_scheduler`` class (which never steps it). A class whose
bases are not all defined in the file may step the optimizer in a base out of sight, so it is
left alone, and so is an optimizer read any other way (stepped, handed to a call, returned,
stored elsewhere): something may step it.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.nodes import walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

LOOPS = (ast.For, ast.AsyncFor, ast.While)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Module)
SCHEDULERS = "torch.optim.lr_scheduler."


def held_unstepped(ctx: Context, fn: ast.AST, recv: ast.expr, own: frozenset[str]) -> bool:
    """``recv`` (``self.<opt>``, read in the method ``fn``) is an optimizer the method's object
    holds, the method is called in a loop of the file, the class's bases are all of this file,
    and every read of ``.<opt>`` in the file is ``.<opt>.<one of own>`` or the optimizer handed
    to a learning-rate scheduler (NOTE [a held optimizer never stepped])."""
    if not (isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name)
            and recv.value.id == "self" and isinstance(fn, (ast.FunctionDef,
                                                            ast.AsyncFunctionDef))):
        return False
    parents = file_parents(ctx)
    cls = parents.get(id(fn))
    if not isinstance(cls, ast.ClassDef) or not _bases_here(ctx, cls):
        return False
    k = ctx.analysis.kind(recv, ctx.scope(fn), recv.lineno)
    if k is None or k.what != OPTIMIZER:
        return False
    return _called_in_loop(ctx, fn.name, parents) and _only_own_reads(ctx, recv.attr, own,
                                                                      parents)


def _bases_here(ctx: Context, cls: ast.ClassDef) -> bool:
    """Every base of ``cls`` is ``object`` or a class defined in this file (recursively)."""
    defined = ctx.memo("held-opt-classes", ctx.tree, lambda: {
        c.name: c for c in walk(ctx.tree) if isinstance(c, ast.ClassDef)})
    seen: set[str] = set()
    todo = [cls]
    while todo:
        c = todo.pop()
        for b in c.bases:
            if isinstance(b, ast.Name) and b.id == "object":
                continue
            if not isinstance(b, ast.Name) or b.id not in defined:
                return False
            if b.id not in seen:
                seen.add(b.id)
                todo.append(defined[b.id])
        if c.keywords:
            return False
    return True


def _called_in_loop(ctx: Context, method: str, parents: dict[int, ast.AST]) -> bool:
    """A call ``<x>.<method>(...)`` of the file sits inside a loop of its own function."""
    for n in walk(ctx.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == method:
            p = parents.get(id(n))
            while p is not None and not isinstance(p, SCOPES):
                if isinstance(p, LOOPS):
                    return True
                p = parents.get(id(p))
    return False


def _only_own_reads(ctx: Context, attr: str, own: frozenset[str],
                    parents: dict[int, ast.AST]) -> bool:
    for n in walk(ctx.tree):
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load):
            p = parents.get(id(n))
            if isinstance(p, ast.Attribute) and p.attr in own:
                continue
            if isinstance(p, ast.Call) and n in p.args and (
                    ctx.qualified_name(p.func) or "").startswith(SCHEDULERS):
                continue
            return False
        if isinstance(n, ast.Constant) and n.value == attr:
            return False  # `getattr(trainer, "optimizer")`: read by its name
    return True
