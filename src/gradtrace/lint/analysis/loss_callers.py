"""The calls other files of the project make of a file's function (NOTE [loss evidence]).

The project index (NOTE [project index] in :mod:`.project`) follows a file's imports outward;
whether a function is a loss needs the other way: who imports and calls it, the reverse
index's call sites (NOTE [reverse index] in :mod:`.callers`), each judged in its own file.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.callers import foreign_sites, subclassed
from gradtrace.lint.analysis.project_files import depth_of

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef


def project_evidence(ctx: Context, fn: Fn,
                     judge: Callable[[Context, ast.AST, ast.Call], bool | None]
                     ) -> bool | None:
    """True: another file of the project calls ``fn`` (a top-level function, or the
    ``forward`` of a top-level class through its instances) where its value reaches a
    backward or it is handed a graph; False: the project's other files call it, or mention it,
    nowhere such and nowhere else; None: no fact (a project of one file, too large, or the
    name used there as a value). ``judge(file's context, function making the call, call)``
    says whether one call counts (None: unknown)."""
    if depth_of(ctx) > 0:
        return None
    cls = ctx.analysis.class_of(fn)
    if cls is not None and (fn.name not in ("forward", "__call__")
                            or cls.node not in ctx.tree.body):
        return None  # a method: called through instances we cannot follow across files
    if cls is None and fn not in ctx.tree.body:
        return None
    if cls is not None and subclassed(ctx, cls.name):
        return None
    sites = foreign_sites(ctx, cls.node if cls is not None else fn)
    if sites is None:
        return None  # no project around it, too large, or handed on as a value there
    unknown = False
    for s in sites:
        got = judge(s.ctx, s.where, s.call)
        if got:
            return True
        unknown = unknown or got is None
    return None if unknown else False
