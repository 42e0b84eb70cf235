"""What a class of the project is given when it is built: the values every construction site
of the checkout passes for a parameter of its ``__init__``, in this file and in the project's
other files (NOTE [project index]), and the classes a value may build.

# NOTE [construction sites]
A parameter of ``__init__`` stored on ``self`` (``self.scheduler = scheduler``) is known only
from the calls that build the class, which often live in another file (a ``run.py`` that builds
the optimizer, the scheduler and a ``Trainer(...)``). :func:`constructor_values` finds them: the
file's own ``Cls(...)`` calls and, in the project's other ``.py`` files (the tree under the
project root of NOTE [project index], at most ``MAX_FILES`` of them, listed once per process),
those whose bytes name the class followed by ``(`` and whose import of that name resolves to
this very class (same file, same line). Every site must pass the parameter by position or by
keyword (a ``*args``/``**kw`` site, or one that leaves it to its default, makes the answer
unknown: None). :func:`built_classes` reads what such a value builds: a class of the project
called directly or through a builder (:func:`~gradtrace.lint.analysis.built_classes.built_class`),
or any class of a module-level table of classes subscripted by a key (``Table[name](opt)``,
``Table = {"a": A, "b": B}``, here or imported from another file). Limits: a site in a file not
yet read whose addition changes the answer is not seen by the result cache (it records the
files read, not the files searched), and a class imported under another name is not followed.
"""
from __future__ import annotations

import ast
import os
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.built_classes import built_class
from gradtrace.lint.analysis.calls import named_calls
from gradtrace.lint.analysis.project import imported
from gradtrace.lint.analysis.project_files import _listing, _load, imports_of, module_context, roots, use

if TYPE_CHECKING:
    from gradtrace.lint.analysis.built_classes import Built
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.context import Context

MAX_FILES = 3000  # .py files of a project searched for construction sites
MAX_BYTES = 1_000_000
_SKIP = frozenset({"site-packages", "dist-packages", "node_modules", "__pycache__", "build"})
_TREES: dict[str, tuple[str, ...]] = {}
_NAMED: dict[tuple[str, str], tuple[int, bool]] = {}
Site = tuple["Context", ast.expr, ast.AST]


def _top(path: str) -> str:
    """The project root of ``path`` (NOTE [project index])."""
    top = os.path.dirname(os.path.realpath(path))
    while "__init__.py" in _listing(top) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    for r in roots():
        if (top + os.sep).startswith(r + os.sep) and len(r) < len(top):
            top = r
    return top


def _tree(top: str) -> tuple[str, ...]:
    got = _TREES.get(top)
    if got is None:
        out: list[str] = []
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in _SKIP)
            out.extend(os.path.join(d, f) for f in sorted(files) if f.endswith(".py"))
            if len(out) > MAX_FILES:
                break
        got = _TREES[top] = tuple(out[:MAX_FILES])
    return got


def _names(path: str, name: str) -> bool:
    """Whether the bytes of ``path`` hold ``name(`` (cached by mtime and size)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    got = _NAMED.get((path, name))
    if got is not None and got[0] == st.st_mtime_ns ^ st.st_size:
        return got[1]
    hit = False
    if st.st_size <= MAX_BYTES:
        try:
            with open(path, "rb") as fh:
                hit = re.search(rb"\b" + name.encode() + rb"\s*\(", fh.read()) is not None
        except OSError:
            hit = False
    if len(_NAMED) > 50_000:
        _NAMED.clear()
    _NAMED[(path, name)] = (st.st_mtime_ns ^ st.st_size, hit)
    return hit


def constructor_values(ctx: Context, cls: ClassInfo, param: str) -> list[Site] | None:
    """(site's context, the value passed for ``param``, the function or module of the call)
    at every construction site of ``cls`` in the project; None when unknown or when a site
    passes nothing for it (NOTE [construction sites])."""
    init = cls.methods.get("__init__")
    if init is None:
        return None
    a = init.args
    names = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
    if param not in names and param not in {x.arg for x in a.kwonlyargs}:
        return None
    here = os.path.realpath(ctx.path)
    out: list[Site] = []
    for path in _tree(_top(ctx.path)):
        if not _names(path, cls.node.name):
            continue
        if path == here:
            sctx = ctx
        else:
            f = _load(path, 1)
            if f is None:
                continue
            sctx = use(f)
        for call, where in named_calls(sctx, cls.node.name):
            if not _builds(sctx, ctx, call, cls, here):
                continue
            if any(isinstance(x, ast.Starred) for x in call.args) or any(
                    k.arg is None for k in call.keywords):
                return None
            binds = {**dict(zip(names, call.args)),
                     **{k.arg: k.value for k in call.keywords if k.arg is not None}}
            v = binds.get(param)
            if v is None:
                return None
            out.append((sctx, v, where))
    return out


def _builds(sctx: Context, ctx: Context, call: ast.Call, cls: ClassInfo, here: str) -> bool:
    """Whether ``call`` (a plain name) of ``sctx``'s file builds ``cls`` of ``ctx``'s file."""
    name = cls.node.name
    if sctx is ctx:
        return ctx.analysis.classes.get(name) is cls
    if name in sctx.analysis.classes:
        return False
    got = imported(sctx, name)
    return isinstance(got, tuple) and isinstance(got[1], ast.ClassDef) and \
        got[1].lineno == cls.node.lineno and os.path.realpath(got[0].path) == here


def built_classes(ctx: Context, v: ast.expr, where: ast.AST, line: int) -> list[Built] | None:
    """Every class ``v`` (a call, or a name bound to one before ``line`` in ``where``) may
    build; None when not shown (NOTE [construction sites])."""
    if isinstance(v, ast.Name):
        b = ctx.scope(where).binding_before(v.id, line)
        v = b.value if b is not None else None
    if not isinstance(v, ast.Call):
        return None
    if isinstance(v.func, ast.Subscript):
        return _table(ctx, v.func.value)
    got = built_class(ctx, v)
    return [got] if got is not None else None


def _table(ctx: Context, e: ast.expr) -> list[Built] | None:
    """The classes of a module-level ``{key: Class, ...}`` that ``e`` names, here or imported."""
    if not isinstance(e, ast.Name):
        return None
    tctx, name = ctx, e.id
    spec = imports_of(ctx).get(name)
    if spec is not None and spec[2] is not None:
        octx = module_context(ctx, spec[0], spec[1])
        if octx is None:
            return None
        tctx, name = octx, spec[2]
    table = None
    for s in tctx.tree.body:
        if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                             for t in s.targets):
            table = s.value
    if not isinstance(table, ast.Dict) or not table.values:
        return None
    out: list[Built] = []
    for x in table.values:
        cls = tctx.analysis.classes.get(x.id) if isinstance(x, ast.Name) else None
        if cls is None:
            return None
        out.append((tctx, cls))
    return out
