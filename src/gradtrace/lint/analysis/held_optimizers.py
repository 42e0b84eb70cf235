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

from gradtrace.lint.analysis.callers import readers
from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.analysis.inherited_attrs import lineage
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
    info = ctx.analysis.classes.get(cls.name) if isinstance(cls, ast.ClassDef) else None
    chain = lineage(ctx, info) if info is not None and info.node is cls else None
    if chain is None:
        return False  # a base out of sight may step it
    k = ctx.analysis.kind(recv, ctx.scope(fn), recv.lineno)
    if k is None or k.what != OPTIMIZER:
        return False
    files = _files(ctx, chain, recv.attr)
    if files is None:
        return False
    return any(_called_in_loop(c, fn.name, file_parents(c)) for c in files) and all(
        _only_own_reads(c, recv.attr, own, file_parents(c)) for c in files)


def _files(ctx: Context, chain: list, attr: str) -> list[Context] | None:  # type: ignore[type-arg]
    """The checked file, and when a base lives in another file (NOTE [inherited attributes]):
    those files and every other file of the project that reads ``.<attr>`` (None: too many
    or unknown)."""
    out = [ctx]
    if all(c is ctx for c, _ in chain):
        return out
    others = readers(ctx, b"." + attr.encode())
    if others is None:
        return None
    for c in [*(c for c, _ in chain), *others]:
        if all(c is not o for o in out):
            out.append(c)
    return out


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
        if isinstance(n, ast.Constant) and n.value == attr and _by_name(n, parents):
            return False  # `getattr(trainer, "optimizer")`: read by its name
    return True


def _by_name(n: ast.Constant, parents: dict[int, ast.AST]) -> bool:
    """The string may name the attribute: an argument of a call (``getattr(t, "optimizer")``,
    ``attrgetter(...)``), a key of ``vars(t)``/``t.__dict__``, anything else but a dict
    literal's key (``{"optimizer": self.optimizer.state_dict()}``), a comparison or a
    subscript of something else (``config["optimizer"]``): those read no attribute."""
    p = parents.get(id(n))
    if isinstance(p, ast.Subscript) and p.slice is n:
        v = p.value
        return isinstance(v, ast.Attribute) and v.attr == "__dict__" or isinstance(
            v, ast.Call) and getattr(v.func, "id", None) == "vars"
    return not (isinstance(p, ast.Dict) and any(k is n for k in p.keys)
                or isinstance(p, ast.Compare))
