"""A custom backward that computes an input's gradient only under another input's flag.

# NOTE [gradient guarded by another input's flag]
pytorch_wavelets' ``SFB1D.backward``: ``dlow, dhigh = None, None`` then
``if ctx.needs_input_grad[0]: dlow, dhigh = afb1d(dy, g0, g1)`` and ``return dlow, dhigh,
...``. When only the second input requires grad, backward returns None for it (GT845, seen at
run time). The ``return`` is not what a maintainer changes: the guard is (its test reads the
flag of input #1 only, while the value it guards is returned for input #2). Read from the
backward's source once the run saw the None: the returned name at a position that got None
is assigned a value only inside an ``if`` whose test reads ``needs_input_grad`` at constant
positions, none of them that position; the finding is made at that ``if``.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.runtime.trace.locate import tree_of


def guard_line(code: Any, missing: set[int]) -> int | None:
    """The line of the ``if`` guarding a gradient returned for an input in ``missing`` (0-based
    tensor input positions) by another input's ``needs_input_grad`` flag, or None."""
    fn, ret = returned_tuple(code)
    if fn is None or ret is None:
        return None
    for i in sorted(missing):
        if i >= len(ret.value.elts) or not isinstance(ret.value.elts[i], ast.Name):
            continue
        line = _guard_of(fn, ret.value.elts[i].id, i)
        if line is not None:
            return line
    return None


def returned_tuple(code: Any) -> tuple[ast.FunctionDef | None, ast.Return | None]:
    """The ``def`` of ``code`` in its file and its first ``return`` of a tuple (or None)."""
    tree = tree_of(code.co_filename)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and min([n.lineno, *(d.lineno for d in n.decorator_list)])
               <= code.co_firstlineno <= n.body[0].lineno
               and n.name == code.co_name), None) if tree is not None else None
    if fn is None:
        return None, None
    return fn, next((n for n in ast.walk(fn) if isinstance(n, ast.Return)
                     and isinstance(n.value, ast.Tuple)), None)


def _flags(test: ast.AST) -> set[int] | None:
    """Constant positions of ``<x>.needs_input_grad[k]`` read in ``test`` (None if some read
    is not at a constant position)."""
    out: set[int] = set()
    for n in ast.walk(test):
        if isinstance(n, ast.Attribute) and n.attr == "needs_input_grad":
            out.add(-1)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) \
                and n.value.attr == "needs_input_grad":
            if not (isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, int)):
                return None
            out.add(n.slice.value)
    out.discard(-1)
    return out


def _assigns(node: ast.AST, name: str) -> list[ast.AST]:
    return [n for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            and any(isinstance(t, ast.Name) and t.id == name for x in (
                n.targets if isinstance(n, ast.Assign) else [n.target]) for t in ast.walk(x))]


def _guard_of(fn: ast.FunctionDef, name: str, pos: int) -> int | None:
    guards = [n for n in ast.walk(fn) if isinstance(n, ast.If) and _flags(n.test)
              and pos not in (_flags(n.test) or set()) and _assigns(n, name)]
    if len(guards) != 1:
        return None
    inside = {id(a) for a in _assigns(guards[0], name)}
    outside = [a for a in _assigns(fn, name) if id(a) not in inside]
    if all(isinstance(a, ast.Assign) and _none_for(a, name) for a in outside):
        return guards[0].lineno
    return None


def _none_for(a: ast.Assign, name: str) -> bool:
    """``name = None`` or ``a, name = None, None``."""
    for t in a.targets:
        if isinstance(t, ast.Name) and t.id == name:
            return isinstance(a.value, ast.Constant) and a.value.value is None
        if isinstance(t, ast.Tuple) and isinstance(a.value, ast.Tuple):
            for x, v in zip(t.elts, a.value.elts):
                if isinstance(x, ast.Name) and x.id == name:
                    return isinstance(v, ast.Constant) and v.value is None
    return False
