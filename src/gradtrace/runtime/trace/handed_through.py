"""A crash on a value a helper only passed on: the caller that handed the value in.

# NOTE [handed through a helper]
A helper that builds an object from its own parameter, unchanged (Dassl's
``def build_optimizer(params, ...): return torch.optim.SGD(params, ...)``), does what it is
given: when the construction refuses that value (a single tensor where an iterable of tensors
is wanted), the line a maintainer changes is the call that handed it in
(``build_optimizer(prompt_learner.ctx)`` -> ``[prompt_learner.ctx]``), not the helper. Read
from the traceback's frame: the refused argument is a bare name that is one of the function's
own parameters and that the function never rebinds before the failing line; the caller is the
next user frame up the live stack. A helper that computes the value itself (``params =
model.ctx``) keeps the construction line.
"""
from __future__ import annotations

import ast
import types

from gradtrace.lint.nodes import scope_nodes
from gradtrace.runtime.frames import Site, is_internal


def _argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    if len(call.args) > index and \
            not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _rebound(fn: ast.AST, name: str, line: int) -> bool:
    """True if ``fn``'s own body binds ``name`` before ``line`` (not a nested function's)."""
    for node in scope_nodes(fn):
        if isinstance(node, ast.Name) and node.id == name and \
                isinstance(node.ctx, (ast.Store, ast.Del)) and node.lineno < line:
            return True
    return False


def caller_of_parameter(frame: types.FrameType, site: Site, index: int = 0,
                        keyword: str = "params") -> Site | None:
    """The caller's line when the argument ``index`` (or ``keyword``) of the call at ``site``
    is one of the frame's function's own parameters, passed on unchanged; None otherwise
    (module-level code, a computed value, no user caller). NOTE [handed through a helper]"""
    from gradtrace.runtime.trace.locate import function_at

    code = frame.f_code
    found = function_at(site)
    if found is None or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    fn = found[1]
    params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    names = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and \
                node.lineno <= site.line <= (node.end_lineno or node.lineno):
            arg = _argument(node, index, keyword)
            if isinstance(arg, ast.Name) and arg.id in params:
                names.append(arg.id)
    if len(set(names)) != 1 or _rebound(fn, names[0], site.line):
        return None
    up = frame.f_back
    while up is not None and is_internal(up.f_code):
        up = up.f_back
    if up is None:
        return None
    return Site(up.f_code.co_filename, up.f_lineno, up.f_code.co_name)
