"""The user's line inside a custom ``torch.autograd.Function.backward`` that made a gradient
non-finite.

# NOTE [NaN born in a custom backward]
NOTE [NaN origin] names the op whose backward turns finite gradients into NaN/Inf from the
node's creation site, which the provenance mode writes for the ops it sees. The node of a
custom ``autograd.Function`` is made by ``Function.apply``, which the mode does not see, and its
backward is the user's own code (a spiking network's surrogate gradient
``g * k * exp(-k * u) / (exp(-k * u) + 1) ** 2``, whose ``inf / inf`` is NaN far below the
threshold): the hunt found the node and had no line, so GT825 fell back to the step. The ops
inside that backward run in the autograd engine, where the mode is not active either, so the
line is read from the code: the returned gradient that is non-finite (the position of the
first non-finite gradient the node passed on, among the elements of the ``return`` tuple),
and the statement that last bound the returned name before that ``return`` (the statement
itself when it returns an expression). Only a backward defined in a user file is named; a
library's Function keeps the fallback.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.runtime.frames import Site


def custom_backward_site(node: Any, index: int) -> tuple[Site, str] | None:
    """(the line computing the ``index``-th gradient the user's backward returns, the
    Function's name) for the node of a custom Function defined in a user file, else None."""
    from gradtrace.runtime.ran import is_user_file
    from gradtrace.runtime.trace.locate import tree_of

    cls = getattr(node, "_forward_cls", None)
    code = getattr(getattr(cls, "backward", None), "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    tree = tree_of(code.co_filename)
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.name == code.co_name and code.co_firstlineno == min(
                   [n.lineno, *(d.lineno for d in n.decorator_list)])),
              None) if tree is not None else None  # (the first line is the decorator's)
    if fn is None:
        return None
    line = _gradient_line(fn, index)
    return Site(code.co_filename, line, code.co_name), cls.__name__


def _gradient_line(fn: ast.FunctionDef, index: int) -> int:
    """The line of the statement that made the ``index``-th returned gradient (see the NOTE);
    the ``def`` line when no ``return`` of the function says."""
    for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None):
        elts = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
        grads = [e for e in elts if not (isinstance(e, ast.Constant) and e.value is None)]
        if not grads:
            continue
        e = elts[index] if index < len(elts) and elts[index] in grads else grads[0]
        if not isinstance(e, ast.Name):
            return ret.lineno
        bound = [s.lineno for s in ast.walk(fn) if isinstance(s, (ast.Assign, ast.AugAssign,
                                                                    ast.AnnAssign))
                 and s.lineno < ret.lineno and any(
                     isinstance(t, ast.Name) and t.id == e.id
                     for t in ast.walk(ast.Tuple(elts=getattr(s, "targets", None)
                                                 or [s.target], ctx=ast.Store())))]
        return max(bound, default=ret.lineno)
    return fn.lineno
