"""Reading what a name or an attribute chain holds in a paused frame, without running user code."""
from __future__ import annotations

import ast
from types import FrameType
from typing import Any, Callable

MISSING = object()


def read_chain(expr: ast.AST, frame: FrameType, attr: Callable[[Any, str], Any],
               builtins: bool = False) -> Any:
    """The object ``expr`` (a name, or a chain of attributes on one) holds in ``frame``;
    ``attr(base, name)`` reads one link without calling user code and returns ``MISSING``
    when it cannot. ``MISSING`` when any link cannot be read."""
    if isinstance(expr, ast.Name):
        spaces = (frame.f_locals, frame.f_globals) + ((frame.f_builtins,) if builtins else ())
        for space in spaces:
            if expr.id in space:
                return space[expr.id]
        return MISSING
    if isinstance(expr, ast.Attribute):
        base = read_chain(expr.value, frame, attr, builtins)
        return MISSING if base is MISSING else attr(base, expr.attr)
    return MISSING


def stored_attr(base: Any, name: str) -> Any:
    """``base.<name>`` from the instance's own ``__dict__`` or its registered ``_modules``,
    running no user code (a property's getter could have side effects); MISSING otherwise."""
    d = getattr(base, "__dict__", None)
    if not isinstance(d, dict):
        return MISSING
    if name in d:
        return d[name]
    mods = d.get("_modules")
    return mods.get(name, MISSING) if isinstance(mods, dict) else MISSING
