"""Which argument of a project function is the reference, read from its other callers.

# NOTE [argument roles by the callers]
A function of the project that compares two tensors (a KL between a pre-edit and a post-edit
model's logits, a distance) does not say by itself which one is the reference: the loss
vocabulary takes the first argument for the prediction (NOTE [prediction position]), and
EasyEdit's ``kl_loc_loss(pre, post)`` takes the reference first. Its callers say it: when the
project's other calls of the very same function (resolved through their files' imports, a
package's re-exports and the star re-exports of a package ``__init__``, read from the files'
text, NOTE [reverse index]) pass a detached value (``x.detach()``) for a parameter, at least
:data:`MIN_CALLS` of them and every one that passes that parameter, the parameter is a
reference by the project's convention: a ``.detach()`` written there is by design, not a cut
of the prediction. Calls the index cannot resolve are not counted either way. Asked only
when GT107 is about to report a detach that is an argument of a project function's call.
"""
from __future__ import annotations

import ast
import os
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.callers import readers
from gradtrace.lint.analysis.project_files import (
    _find_module, _load, _module_file, _outline, _text, imports_of, use)
from gradtrace.lint.grad_modes import FUNCTION_TYPES

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

MIN_CALLS = 2
MAX_ROLE_READERS = 24  # files naming the function that are parsed for this fact
_STAR = re.compile(rb"^[ \t]*from[ \t]+\.([\w.]+)[ \t]+import[ \t]+\*", re.M)


def detached_by_callers(ctx: Context, stmt: ast.stmt, cut: ast.expr) -> bool:
    """``cut`` (a ``.detach()`` in ``stmt``) is an argument of a call of a project function
    whose other calls detach the same parameter (NOTE [argument roles by the callers])."""
    call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call) and (
        any(a is cut for a in n.args) or any(k.value is cut for k in n.keywords))), None)
    got = _resolve(ctx, call.func) if call is not None else None
    if got is None:
        return False
    octx, fn = got
    param = next((p for p, v in octx.analysis.arguments(fn, call).items() if v is cut), None)
    if param is None:
        return False
    me = (os.path.realpath(ctx.path), call.lineno, call.col_offset)
    key = (os.path.realpath(octx.path), fn.lineno)
    passed: list[ast.expr] = []
    for rctx in [octx, *(readers(octx, fn.name.encode(), limit=MAX_ROLE_READERS) or ())]:
        from gradtrace.lint.analysis.calls import call_sites
        for c, _, _ in call_sites(rctx, fn.name):
            if (os.path.realpath(rctx.path), c.lineno, c.col_offset) == me:
                continue
            r = _resolve(rctx, c.func)
            if r is None or (os.path.realpath(r[0].path), r[1].lineno) != key:
                continue
            v = rctx.analysis.arguments(fn, c).get(param)
            if v is not None:
                passed.append(v)
    return len(passed) >= MIN_CALLS and all(_detached(v) for v in passed)


def _detached(e: ast.expr) -> bool:
    """``x.detach()``, ``x.detach().float()``, ``x[:, -n:].detach()``."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            if e.func.attr in ("detach", "detach_"):
                return True
            e = e.func.value
        elif isinstance(e, (ast.Attribute, ast.Subscript)):
            e = e.value
        else:
            return False


def _resolve(ctx: Context, func: ast.expr) -> tuple[Context, ast.FunctionDef] | None:
    """The top-level function of the project ``func`` names: of this file, through the
    project index, or through a package's (star) re-exports read from the text."""
    from gradtrace.lint.analysis.project import foreign_def
    if isinstance(func, ast.Name) and func.id in ctx.analysis.functions and \
            func.id not in imports_of(ctx):
        fn = ctx.analysis.functions[func.id]
        return (ctx, fn) if fn in ctx.tree.body else None  # type: ignore[return-value]
    got = foreign_def(ctx, func)
    if got is not None:
        return got if isinstance(got[1], FUNCTION_TYPES) else None  # type: ignore[return-value]
    spec = imports_of(ctx).get(func.id) if isinstance(func, ast.Name) else None
    if spec is None or spec[2] is None:
        return None
    path = _find_module(ctx, spec[0], spec[1])
    path = _defining(path, spec[2], 3) if path is not None else None
    f = _load(path, 1) if path is not None else None
    if f is None:
        return None
    octx = use(f)
    fn = octx.analysis.functions.get(spec[2])
    return (octx, fn) if fn is not None and fn in octx.tree.body else None  # type: ignore


def _defining(path: str, name: str, hops: int) -> str | None:
    """The file defining the top-level function ``name`` that the module at ``path`` holds
    or re-exports (``from .m import name``, ``from .m import *``), from the files' bytes."""
    defs, exports = _outline(path)
    if name in defs:
        return path
    if not hops:
        return None
    folder = os.path.dirname(path)
    subs = [exports[name]] if name in exports else \
        [m.group(1).decode() for m in _STAR.finditer(_text(path))]
    for sub in subs:
        f = _module_file(folder, sub)
        got = _defining(f, name, hops - 1) if f is not None else None
        if got is not None:
            return got
    return None
