"""A call guarded by a flag that the statements building a value set.

# NOTE [flag set beside the build]
``elif kind == 'plateau': self.scheduler = ReduceLROnPlateau(...); self.use_metric = True``
and elsewhere ``if self.use_metric: self.scheduler.step(metric) else: self.scheduler.step()``:
the bare ``step()`` runs only where the flag is false, and the flag is true for the object
the plateau branch built. The flag is read as a dotted name (``self.use_metric``,
``use_metric``) that the block holding the build assigns the constant ``True`` (a sibling
statement of the same ``if`` arm or body); the guarded call lies in the ``else`` arm of
``if <flag>:`` or in the body of ``if not <flag>:``. The flag's other assignments do not
matter: in the run that built the value, the build's block ran last for it.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.file_parents import file_parents
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_BLOCKS = ("body", "orelse", "finalbody")


def _flags_set_true(block: list[ast.stmt]) -> set[str]:
    return {d for s in block if isinstance(s, ast.Assign)
            and isinstance(s.value, ast.Constant) and s.value.value is True
            for t in s.targets if (d := dotted(t)) is not None}


def _block_of(stmt: ast.AST, parents: dict[int, ast.AST]) -> list[ast.stmt]:
    up = parents.get(id(stmt))
    for f in _BLOCKS:
        got = getattr(up, f, None)
        if isinstance(got, list) and any(s is stmt for s in got):
            return got
    return []


def guarded_off_by_build_flag(ctx: Context, build: ast.AST, call: ast.AST) -> bool:
    """``call`` runs only where a flag is false that the block holding ``build`` sets
    true (NOTE [flag set beside the build])."""
    parents = file_parents(ctx)
    stmt = build
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = parents.get(id(stmt))
    if stmt is None:
        return False
    flags = _flags_set_true(_block_of(stmt, parents))
    if not flags:
        return False
    child, up = call, parents.get(id(call))
    while up is not None:
        if isinstance(up, ast.If):
            t, neg = up.test, False
            if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
                t, neg = t.operand, True
            name = dotted(t)
            in_else = any(s is child for s in up.orelse)
            in_body = any(s is child for s in up.body)
            if name in flags and ((in_else and not neg) or (in_body and neg)):
                return True
        if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        child, up = up, parents.get(id(up))
    return False
