"""Where the ``find_unused_parameters`` a ``DistributedDataParallel`` got was decided.

# NOTE [flag left at its default]
A trainer class (or helper) often builds the wrapper with
``DistributedDataParallel(module, find_unused_parameters=find_unused_parameters)`` and takes the
flag as a parameter of its own with a default (GigaGAN's ``def __init__(..., find_unused_parameters
=False)``). When the caller leaves the argument out, the value DDP got was decided by that
default: the line to change is the default (or the caller), not the ``DDP(...)`` call, which
passes the flag through as it must.

Run-time facts, while DDP's ``__init__`` registers the module it wraps
(NOTE [wrapper built here]): the innermost user frame is running the ``DDP(...)`` call; its
``find_unused_parameters=`` keyword is a plain name that is a parameter of that frame's
function, never assigned in it, with a default in the ``def``; the frame's caller (the next
user frame) is running one call on its line that passes neither that keyword nor as many
positional arguments as reach the parameter, and no ``*args``/``**kwargs``. Then the default
decided the flag: its line is kept with the wrapper's. GT880 names it first when DDP waited for
parameters that ran in other iterations (a branch) and the flag was off.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.locate import tree_of

_FLAG = "find_unused_parameters"
_DEPTH = 16


def _user_frames(frame: Any) -> list[Any]:
    """The innermost two user frames from ``frame`` outwards."""
    out: list[Any] = []
    depth = 0
    while frame is not None and len(out) < 2 and depth < _DEPTH:
        depth += 1
        if not is_internal(frame.f_code) and not frame.f_code.co_filename.startswith("<"):
            out.append(frame)
        frame = frame.f_back
    return out


def _node_at(tree: ast.AST, kind: type, line: int, pred: Any = None) -> list[Any]:
    return [n for n in ast.walk(tree) if isinstance(n, kind)
            and n.lineno <= line <= (n.end_lineno or n.lineno) and (pred is None or pred(n))]


def flag_default(frame: Any) -> Site | None:
    """The line of the default that decided DDP's ``find_unused_parameters`` (the NOTE)."""
    frames = _user_frames(frame)
    if len(frames) < 2:
        return None
    inner, outer = frames
    code = inner.f_code
    tree = tree_of(code.co_filename)
    if tree is None:
        return None
    calls = _node_at(tree, ast.Call, inner.f_lineno,
                     lambda n: any(k.arg == _FLAG for k in n.keywords))
    value = next((k.value for k in calls[0].keywords if k.arg == _FLAG), None) if len(calls) == 1 \
        else None
    if not isinstance(value, ast.Name):
        return None
    defs = _node_at(tree, (ast.FunctionDef, ast.AsyncFunctionDef), code.co_firstlineno,
                    lambda n: n.name == code.co_name and code.co_firstlineno in (
                        n.lineno, *(d.lineno for d in n.decorator_list[:1])))
    if len(defs) != 1:
        return None
    fn = defs[0]
    args = [*fn.args.posonlyargs, *fn.args.args]
    names = [a.arg for a in args]
    if value.id not in names or any(isinstance(n, ast.Name) and n.id == value.id
                                    and isinstance(n.ctx, ast.Store) for n in ast.walk(fn)):
        return None
    index = names.index(value.id)
    first_default = len(args) - len(fn.args.defaults)
    if index < first_default:
        return None
    default = fn.args.defaults[index - first_default]
    bound = names[0] in ("self", "cls")
    callee = type(inner.f_locals.get("self")).__name__ if code.co_name == "__init__" and bound \
        else code.co_name
    if not _left_out(outer, callee, value.id, index - int(bound)):
        return None
    return Site(code.co_filename, default.lineno, code.co_name, default.col_offset)


def _left_out(frame: Any, callee: str, name: str, position: int) -> bool:
    """The one call of ``callee`` on the caller's line passes neither ``name`` nor
    ``position + 1`` positional arguments, nor ``*args``/``**kwargs``."""
    tree = tree_of(frame.f_code.co_filename)
    calls = [c for c in _node_at(tree, ast.Call, frame.f_lineno)
             if (c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", ""))
             == callee] if tree is not None else []
    if len(calls) != 1:
        return False
    call = calls[0]
    return len(call.args) <= position and not any(isinstance(a, ast.Starred) for a in call.args) \
        and not any(k.arg is None or k.arg == name for k in call.keywords)


def flag_default_of(built: dict[int, Any] | None, ddp: Any) -> Site | None:
    """The default kept for ``ddp`` when it was built (NOTE [layer built here]'s table)."""
    rec = built.get(id(ddp)) if built else None
    return rec[4] if rec is not None and rec[0]() is ddp else None


__all__ = ["flag_default", "flag_default_of"]
