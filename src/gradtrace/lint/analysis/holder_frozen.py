"""Whether ``obj.attr`` is a module the class of ``obj`` freezes when it is built.

# NOTE [frozen by its holder]
An EMA teacher (``class EMATeacher: def __init__(self, student): self.module =
copy.deepcopy(student); for p in self.module.parameters(): p.requires_grad_(False)``) holds a
frozen copy of the student: every weight of ``teacher.module`` requires no grad from the
moment the holder exists. :func:`holder_frozen` answers for ``teacher.module`` read at a line
when ``teacher`` is, by the analysis layer's kind, an instance of one class (of this file,
imported from another file of the project, or handed to the function by every caller in
another file: NOTE [handed class across files]) whose ``__init__`` freezes ``self.module``
outside any ``if``, ``try``, ``with`` or ``while`` (the statements it always runs, with the
methods it calls on ``self``: NOTE [frozen when built]). Nothing is known when the class's
file or the asking file may set ``requires_grad`` back on anywhere (``file_unfreezes``), or
when a method of the class other than ``__init__`` binds ``self.module`` again.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.frozen_params import file_unfreezes
from gradtrace.lint.analysis.kinds import MODULE, OBJECT
from gradtrace.lint.analysis.owners import home
from gradtrace.lint.analysis.self_frozen import _frozen_by, _straight
from gradtrace.lint.names import dotted

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context


def holder_frozen(ctx: Context, owner: str, scope: object, line: int
                  ) -> tuple[Context, ClassInfo, ast.stmt] | None:
    """(the class's file, the class, its freezing statement) when ``owner`` (dotted,
    ``teacher.module``) is an attribute its holder's class freezes when built
    (NOTE [frozen by its holder]); None otherwise."""
    holder, _, attr = owner.rpartition(".")
    if not holder or not attr.isidentifier() or not all(
            p.isidentifier() for p in holder.split(".")) or file_unfreezes(ctx):
        return None
    expr = ast.parse(holder, mode="eval").body
    cls = instance_class(ctx, expr, scope, line)
    if cls is None:
        return None
    hctx = home(ctx, cls.node)
    return _frozen_attr(hctx, cls, attr)


def instance_class(ctx: Context, expr: ast.expr, scope: object, line: int, depth: int = 0
                   ) -> ClassInfo | None:
    """The class (of this file or of another file of the project) ``expr`` is an instance
    of, by its kind; an instance of a plain class of another file (which has no kind here)
    by its binding, or, for a parameter, by what every caller passes (one call up); None:
    unknown."""
    from gradtrace.lint.analysis.project import (
        _binding, _instance_class, carried_class, foreign_class)
    k = ctx.analysis.kind(expr, scope, line)  # type: ignore[arg-type]
    if k is None and isinstance(expr, ast.Name):
        b = _binding(ctx, scope, expr.id, line)
        if b is not None and getattr(b, "value", None) is not None:
            return _instance_class(ctx, scope, b, 0)
        fn = getattr(scope, "node", None)
        return _handed(ctx, fn, expr.id, depth) if b is None or b.value is None else None
    if k is None or k.what not in (MODULE, OBJECT):
        return None
    node = k.node
    if node is None:
        return carried_class(k.cls)
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Name) and f.id in ctx.analysis.classes:
        return ctx.analysis.classes[f.id]
    return foreign_class(ctx, f)


def _handed(ctx: Context, fn: object, name: str, depth: int) -> ClassInfo | None:
    """The one class every call of ``fn`` (here and in the project's other files) passes an
    instance of for its parameter ``name``."""
    from gradtrace.lint.analysis.foreign_params import other_sites
    from gradtrace.lint.analysis.grad_values import callers
    from gradtrace.lint.analysis.callees import function_sites
    from gradtrace.lint.grad_modes import FUNCTION_TYPES
    if depth or not isinstance(fn, FUNCTION_TYPES) \
            or not any(a.arg == name for a in (*fn.args.posonlyargs, *fn.args.args)):
        return None
    got: list[ClassInfo | None] = []
    given = list(callers(ctx, fn, name))
    if len(given) != len(function_sites(ctx.analysis, fn) or []):
        return None
    for call, where, arg in given:
        got.append(instance_class(ctx, arg, ctx.scope(where), call.lineno, depth + 1))
    for s in other_sites(ctx, fn) if fn in ctx.tree.body else ():
        arg = s.ctx.analysis.arguments(fn, s.call).get(name)  # type: ignore[arg-type]
        got.append(instance_class(s.ctx, arg, s.ctx.scope(s.where), s.call.lineno, depth + 1)
                   if arg is not None else None)
    if not got or any(c is None for c in got) or len({id(c.node) for c in got}) != 1:
        return None
    return got[0]


def _frozen_attr(hctx: Context, cls: ClassInfo, attr: str
                 ) -> tuple[Context, ClassInfo, ast.stmt] | None:
    memo: dict[tuple[int, str], ast.stmt | None] = hctx.memo("holder-frozen", hctx.tree, dict)
    key = (id(cls.node), attr)
    if key not in memo:
        memo[key] = _freeze_of(hctx, cls, attr)
    got = memo[key]
    return (hctx, cls, got) if got is not None else None


def _freeze_of(hctx: Context, cls: ClassInfo, attr: str) -> ast.stmt | None:
    init = cls.methods.get("__init__")
    if init is None or file_unfreezes(hctx):
        return None
    for m in cls.methods.values():
        if m is init:
            continue
        for n in ast.walk(m):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                n, (ast.AnnAssign, ast.AugAssign)) else []
            if any(dotted(t) == "self." + attr for t in targets):
                return None  # bound again by another method
    return next((st for st in _straight(init, cls, 0) if attr in _frozen_by(st)), None)
