"""Statements that run only when no process group is up, in a program that starts one.

# NOTE [arm without a process group]
``if not dist.is_initialized(): return tensor`` is the single-process fallback of a
distributed helper (``concat_all_gather``, a gathered loss): in a file that starts a process
group (``torch.distributed.init_process_group``), ``is_initialized()`` is True wherever that
program trains across processes, and the fallback arm does not run there. A reading of the
helper's returns (NOTE [no-grad helpers]) leaves such an arm's ``return`` out: what the helper
gives back in the distributed run is what its other returns give. Only ``not
is_initialized()`` (alone, or as the ``not`` of ``is_available() and is_initialized()``, or
one side of an ``or``) and a ``return`` that is a statement of that ``if``'s body, not its
``else``."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import parent_map, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

STARTS = "torch.distributed.init_process_group"
UP = "torch.distributed.is_initialized"
AVAILABLE = "torch.distributed.is_available"


def starts_process_group(ctx: Context) -> bool:
    """The file calls ``torch.distributed.init_process_group``."""
    def make() -> bool:
        return ctx.mentions("init_process_group") and any(
            isinstance(n, ast.Call) and ctx.qualified_name(n.func) == STARTS
            for n in walk(ctx.tree))
    return ctx.memo("starts-process-group", ctx.tree, make)  # type: ignore[no-any-return]


def _is(e: ast.expr, name: str, ctx: Context) -> bool:
    return isinstance(e, ast.Call) and not e.args and ctx.qualified_name(e.func) == name


def _says_down(test: ast.expr, ctx: Context) -> bool:
    """``test`` is true whenever no process group is up (and only tells that)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_says_down(v, ctx) for v in test.values)
    if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
        return False
    inner = test.operand
    if _is(inner, UP, ctx):
        return True
    return isinstance(inner, ast.BoolOp) and isinstance(inner.op, ast.And) and all(
        _is(v, UP, ctx) or _is(v, AVAILABLE, ctx) for v in inner.values) and any(
        _is(v, UP, ctx) for v in inner.values)


def without_process_group(ctx: Context, stmt: ast.stmt) -> bool:
    """``stmt`` is in the body of an ``if`` that runs only when no process group is up, in a
    file that starts one (NOTE [arm without a process group])."""
    if not ctx.mentions("is_initialized") or not starts_process_group(ctx):
        return False
    parents = ctx.memo("parent-map", ctx.tree, lambda: parent_map(ctx.tree))
    node: ast.AST = stmt
    while (up := parents.get(id(node))) is not None and not isinstance(
            up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        if isinstance(up, ast.If) and any(s is node for s in up.body) \
                and _says_down(up.test, ctx):
            return True
        node = up
    return False
