"""The modules callers of another file hand a parameter, by the class spelling their kind carries
(NOTE [kinds by the callers]): the other file and the call that built each there."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# a carried module's class spelling -> (the other file, the call that built it there)
_MADE: dict[str, tuple[Context, ast.Call]] = {}


def carried_call(cls: str | None) -> tuple[Context, ast.Call] | None:
    """(the caller's file, its call building the module) for a carried class spelling."""
    return _MADE.get(cls or "")
