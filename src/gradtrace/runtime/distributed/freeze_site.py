"""# NOTE [freeze applied by a train() override]
``DistributedDataParallel`` records the parameters it reduces in its constructor. A backbone
whose ``train(mode)`` override applies its freeze (``self._freeze_stages()``, the OpenMMLab
pattern) freezes them only when ``.train()`` runs, and a runner calls it after the wrap: the
reducer waits for gradients that never come ("Expected to have finished reduction"). The freeze
line itself is right; what is missing is the same freeze in the constructor, before the wrap
sees the parameters. Read from the file that ran: the function holding the freeze is the
class's ``train`` method, or a method that ``train`` calls through ``self`` and ``__init__``
does not: the line named is the last statement of that class's ``__init__`` (where the call
belongs). Otherwise the freeze line stays.
"""
from __future__ import annotations

import ast

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import tree_of

Fn = (ast.FunctionDef, ast.AsyncFunctionDef)


def _calls_self(fn: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == name and isinstance(n.func.value, ast.Name)
               and n.func.value.id == "self" for n in ast.walk(fn))


def constructor_end(site: Site | None) -> Site | None:
    """The last statement of the ``__init__`` that should apply the freeze made at ``site``
    by a ``train()`` override (NOTE [freeze applied by a train() override]), else None."""
    tree = tree_of(site.path) if site is not None else None
    for cls in ast.walk(tree) if tree is not None else ():
        if not isinstance(cls, ast.ClassDef):
            continue
        methods = {f.name: f for f in cls.body if isinstance(f, Fn)}
        fn = methods.get(site.function)  # type: ignore[union-attr]
        if fn is None or not fn.lineno <= site.line <= (fn.end_lineno or 0):  # type: ignore[union-attr]
            continue
        train, init = methods.get("train"), methods.get("__init__")
        if train is None or init is None or not init.body:
            return None
        if fn is train or _calls_self(train, fn.name) and not _calls_self(init, fn.name):
            last = init.body[-1]
            return Site(site.path, last.lineno, "__init__", last.col_offset)  # type: ignore[union-attr]
        return None
    return None
