"""What a module binds at its top level, and what a star import of it takes
(``from .models import *``: NOTE [project index] in :mod:`.project`)."""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

EVERY_PUBLIC: frozenset[str] = frozenset({"<every public name>"})  # no `__all__`


def _module_body(ctx: Context) -> list[ast.stmt]:
    """The module's statements, through ``if``/``try`` blocks (what runs at import)."""
    out: list[ast.stmt] = []
    todo = list(ctx.tree.body)
    for n in todo:
        out.append(n)
        if isinstance(n, (ast.If, ast.Try)):
            todo.extend(n.body)
            todo.extend(n.orelse)
            todo.extend(getattr(n, "finalbody", ()))
            for h in getattr(n, "handlers", ()):
                todo.extend(h.body)
    return out


def stars_of(ctx: Context) -> tuple[tuple[int, str], ...]:
    """(level, module) of the file's module-level ``from module import *``, in order."""
    return ctx.memo("project-stars", ctx.tree, lambda: tuple(
        (n.level, n.module or "") for n in sorted(
            (s for s in _module_body(ctx) if isinstance(s, ast.ImportFrom)
             and any(a.name == "*" for a in s.names)), key=lambda s: (s.lineno, s.col_offset))))


def module_names(ctx: Context) -> dict[str, str]:
    """Name -> how the module binds it at its top level: ``def``, ``class``, ``import`` or
    ``other`` (an assignment, a loop variable, ``with ... as``, a ``global`` of a function)."""
    def make() -> dict[str, str]:
        out: dict[str, str] = {}
        for s in _module_body(ctx):
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[s.name] = "def" if out.get(s.name, "def") == "def" else "other"
            elif isinstance(s, ast.ClassDef):
                out[s.name] = "class" if out.get(s.name, "class") == "class" else "other"
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    if a.name != "*":
                        n = a.asname or a.name.partition(".")[0]
                        out[n] = "import" if out.get(n, "import") == "import" else "other"
            else:
                for t in ast.walk(s):
                    if isinstance(t, ast.Name) and not isinstance(t.ctx, ast.Load):
                        out[t.id] = "other"
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Global):
                out.update((g, "other") for g in n.names)
        return out
    return ctx.memo("project-module-names", ctx.tree, make)


def bound_names(ctx: Context) -> frozenset[str]:
    """Every name the file binds anywhere (module level, parameters, locals, imports)."""
    def make() -> frozenset[str]:
        out = set(module_names(ctx))
        for n in ast.walk(ctx.tree):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.add(n.id)
            elif isinstance(n, ast.arg):
                out.add(n.arg)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                out.update(a.asname or a.name.partition(".")[0] for a in n.names)
        return frozenset(out)
    return ctx.memo("project-bound-names", ctx.tree, make)


def public_names(ctx: Context) -> frozenset[str] | None:
    """The names a star import of the file takes when it lists them (a literal ``__all__``,
    extended by ``+=``/``.extend``/``.append`` of literals); :data:`EVERY_PUBLIC`: no
    ``__all__`` (every name not starting with ``_``); None: an ``__all__`` built otherwise."""
    def make() -> frozenset[str] | None:
        out: set[str] = set()
        seen = False
        read: set[int] = set()  # the `__all__` names of the statements understood
        for s in _module_body(ctx):
            v = None
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                ts = s.targets if isinstance(s, ast.Assign) else [s.target]
                if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in ts):
                    continue
                if isinstance(s, ast.Assign) and len(ts) > 1:
                    return None
                read.update(id(t) for t in ts)
                v = s.value
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                    isinstance(s.value.func, ast.Attribute) and \
                    isinstance(s.value.func.value, ast.Name) and \
                    s.value.func.value.id == "__all__":
                if s.value.func.attr not in ("extend", "append") or len(s.value.args) != 1:
                    return None
                read.add(id(s.value.func.value))
                v = s.value.args[0]
                if s.value.func.attr == "append":
                    v = ast.List(elts=[v], ctx=ast.Load())
            else:
                continue
            if not isinstance(v, (ast.List, ast.Tuple)) or not all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts):
                return None
            if isinstance(s, (ast.Assign, ast.AnnAssign)):
                out.clear()
            seen = True
            out.update(e.value for e in v.elts)  # type: ignore[attr-defined]
        if any(isinstance(n, ast.Name) and n.id == "__all__" and id(n) not in read
               for n in ast.walk(ctx.tree)):
            return None  # `__all__` written (or read) some other way: in a loop, a function
        return frozenset(out) if seen else EVERY_PUBLIC
    return ctx.memo("project-public-names", ctx.tree, make)
