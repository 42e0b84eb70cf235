"""The calls other files of the project make of a file's function (NOTE [loss evidence]).

The project index (NOTE [project index] in :mod:`.project`) follows a file's imports outward;
whether a function is a loss needs the other way: who imports and calls it. The project's
Python files are listed once per process and root (at most :data:`MAX_FILES`: a larger tree
gives no fact), their bytes searched for the function's name, and only the files that hold it
parsed (the project index's own cache, read as the checked file's dependencies: NOTE [cache]).
A call there counts when it resolves, through that file's imports, to this very function.
"""
from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.project_files import (
    _bases, _load, _text, depth_of, imports_of, roots, use)

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

Fn = ast.FunctionDef | ast.AsyncFunctionDef
MAX_FILES = 800     # Python files of a project searched; a larger one gives no fact
MAX_READERS = 12    # files holding the name that are parsed; more: no fact
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "dist-packages",
                        "build", "dist", "venv", "env"})
_LISTED: dict[str, tuple[str, ...] | None] = {}


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
    name = cls.name if cls is not None else fn.name
    me = os.path.realpath(ctx.path)
    if not os.path.isfile(me):
        return None  # a buffer or a snippet: no project around it
    files = _project(me)
    if files is None or len(files) < 2:
        return None  # a file of one: no other code to ask
    word = name.encode()
    readers = [p for p in files if p != me and word in _text(p)]
    if len(readers) > MAX_READERS or cls is not None and subclassed(ctx, name):
        return None
    unknown = False
    for path in readers:
        f = _load(path, 1)
        if f is None:
            return None
        octx = use(f)
        sites = _sites_in(octx, name, me, cls is not None)
        if sites is None:
            return None  # handed on as a value there
        for call, where in sites:
            got = judge(octx, where, call)
            if got:
                return True
            unknown = unknown or got is None
    return None if unknown else False


def _sites_in(octx: Context, name: str, me: str, is_class: bool
              ) -> list[tuple[ast.Call, ast.AST]] | None:
    """The calls in ``octx``'s file of ``name`` imported from the file ``me`` (for a class,
    of its instances); None when the imported name is also used as a value."""
    from gradtrace.lint.analysis.callees import module_sites, object_sites
    from gradtrace.lint.analysis.calls import call_sites
    from gradtrace.lint.analysis.project import foreign_def
    out: list[tuple[ast.Call, ast.AST]] = []
    local: set[str] = set()
    for call, _, outer in call_sites(octx, name):
        got = foreign_def(octx, call.func)
        if got is None and isinstance(call.func, ast.Name) and \
                name not in octx.analysis.functions and name not in octx.analysis.classes:
            return None  # `from src.dlutils import *`: may be this one, not followed
        root = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if got is None and root is not call.func and isinstance(root, ast.Name) and \
                root.id in imports_of(octx):
            return None  # `losses.dice_loss(...)` through an import the index cannot follow
        if got is None or got[1].name != name or \
                os.path.realpath(got[0].path) != me:  # type: ignore[attr-defined]
            continue
        where = next((o for o in reversed(outer)
                      if isinstance(o, (ast.FunctionDef, ast.AsyncFunctionDef))), octx.tree)
        if isinstance(call.func, ast.Name):
            local.add(call.func.id)
        out.append((call, where))
    if is_class:
        if subclassed(octx, name):
            return None  # its `forward` runs for the instances of a subclass too
        sites: list[tuple[ast.Call, ast.AST]] = []
        for lname in local:
            cinfo = octx.analysis.classes.get(lname)
            if cinfo is not None:
                continue  # a class of that file by the same name
            sites += module_sites(octx.analysis, lname) + object_sites(octx.analysis, lname)
        return None if out and not sites else sites  # built there, called where we do not see
    for lname in local:
        for n in ast.walk(octx.tree):
            if isinstance(n, ast.Name) and n.id == lname and isinstance(n.ctx, ast.Load) \
                    and not _called(octx, n):
                return None
    return out


def subclassed(octx: Context, name: str) -> bool:
    """A class of ``octx``'s file derives from a class spelled ``name`` (``class
    DiceLoss(_AbstractDiceLoss)``, or ``(base.Name)``)."""
    return any(isinstance(n, ast.ClassDef) and any(
        (b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)) == name
        for b in n.bases) for n in ast.walk(octx.tree))


def _called(octx: Context, n: ast.Name) -> bool:
    parents = octx.memo("loss-callers-called", octx.tree, lambda: {
        id(c.func) for c in ast.walk(octx.tree) if isinstance(c, ast.Call)})
    return id(n) in parents


def _project(me: str) -> tuple[str, ...] | None:
    """The Python files of the project holding ``me`` (None: more than :data:`MAX_FILES`)."""
    top = next((r for r in roots() if (me + os.sep).startswith(r + os.sep)), None)
    if top is None:
        bases = [b for b in _bases(me, 0) if os.path.basename(b) != "src"]
        top = bases[-1] if bases else os.path.dirname(me)
    if top not in _LISTED:
        _LISTED[top] = _walk(top)
    return _LISTED[top]


def _walk(top: str) -> tuple[str, ...] | None:
    out: list[str] = []
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in _SKIP_DIRS]
        for f in files:
            if f.endswith(".py"):
                out.append(os.path.join(d, f))
                if len(out) > MAX_FILES:
                    return None
    return tuple(out)
