"""Where in another file a cut reached from this file is made (NOTE [project index])."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from gradtrace.lint.context import Context


class Away(NamedTuple):
    """Where in another file a cut that a call of this file reaches is made."""

    path: str
    line: int
    code: str  # the cutting expression
    operand: str  # what it cuts
    helper: str  # the function of that file the call runs


def cut_away(ctx: Context, node: ast.AST) -> Away | None:
    """The other file's cut that the call ``node`` of this file reaches
    (NOTE [project index]), or None: the cut is ``node`` itself, in this file."""
    got = ctx.memo("project-away-cuts", ctx.tree, dict).get(id(node))
    return got[1] if got is not None and got[0] is node else None
