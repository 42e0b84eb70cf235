"""The class a call builds, when the code shows it: a class of the file or of the project
called directly (``Sched(opt)``, ``utils.Sched(opt)``), or the one class a builder function
returns (``get_scheduler(cfg, opt)`` whose every ``return`` builds ``LRScheduler(...)``, in
this file or in another file of the project: NOTE [project index]).

# NOTE [own schedule]
A class of the project that is no torch scheduler (its bases are ``object`` or such classes of
the same file) and whose methods step nothing else (no ``x.step(...)`` call in them) sets the
learning rate itself: the order of its ``step()`` against the optimizer's is its own design
(U2PL's ``LRScheduler`` sets the rate for the coming iteration, then counts it). PyTorch's
"first value of the schedule skipped" belongs to ``torch.optim.lr_scheduler`` only.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.kinds import SCHEDULER
from gradtrace.lint.analysis.modules import torch_base
from gradtrace.lint.analysis.project import foreign_def

if TYPE_CHECKING:
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

Built = tuple["Context", "ClassInfo"]
MAX_HOPS = 3


def built_class(ctx: Context, call: ast.Call, hops: int = 0) -> Built | None:
    """(the class's file context, the class) ``call`` builds, or None when not shown."""
    f = call.func
    a = ctx.analysis
    if isinstance(f, ast.Name):
        cls = a.classes.get(f.id)
        if cls is not None:
            return ctx, cls
        fn = a.functions.get(f.id)
        if fn is not None:
            return _returned(ctx, fn, hops)
    got = foreign_def(ctx, f)
    if got is None:
        return None
    octx, node = got
    if isinstance(node, ast.ClassDef):
        cls = octx.analysis.classes.get(node.name)
        return (octx, cls) if cls is not None and cls.node is node else None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _returned(octx, node, hops)
    return None


def _returned(ctx: Context, fn: ast.FunctionDef | ast.AsyncFunctionDef, hops: int
              ) -> Built | None:
    """The one class every ``return`` of ``fn`` builds (directly or through a local name)."""
    if hops >= MAX_HOPS:
        return None
    scope = ctx.scope(fn)
    found: Built | None = None
    for s in scope.stmts:
        if not isinstance(s, ast.Return) or s.value is None:
            continue
        v: ast.AST | None = s.value
        if isinstance(v, ast.Name):
            b = scope.binding_before(v.id, s.lineno)
            v = b.value if b is not None else None
        got = built_class(ctx, v, hops + 1) if isinstance(v, ast.Call) else None
        if got is None or (found is not None and found[1] is not got[1]):
            return None
        found = got
    return found


def own_schedule(ctx: Context, cls: ClassInfo) -> bool:
    """Whether ``cls`` sets the learning rate by its own ``step()`` (NOTE [own schedule])."""
    if torch_base(ctx, ctx.analysis.classes, cls.node) == SCHEDULER:
        return False
    line = _lineage(ctx, cls)  # the class and its bases of the file (its `step` inherited)
    if not _plain(ctx, line) or not any("step" in c.methods for c in line):
        return False
    return not any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr == "step" and not _is_self(n.func.value)
                   for c in line for n in ast.walk(c.node))


def _lineage(ctx: Context, cls: ClassInfo) -> list[ClassInfo]:
    out = [cls]
    for c in out:
        for b in c.node.bases:
            own = ctx.analysis.classes.get(b.id) if isinstance(b, ast.Name) else None
            if own is not None and own not in out and len(out) <= MAX_HOPS:
                out.append(own)
    return out


def _is_self(e: ast.expr) -> bool:
    return isinstance(e, ast.Name) and e.id == "self"


def _plain(ctx: Context, line: list[ClassInfo]) -> bool:
    """Whether every base in the lineage is ``object`` or a class of the file (the lineage
    whole: not cut short at ``MAX_HOPS``)."""
    classes = ctx.analysis.classes
    return len(line) <= MAX_HOPS and all(
        isinstance(b, ast.Name) and (b.id == "object" or b.id in classes)
        for c in line for b in c.node.bases)
