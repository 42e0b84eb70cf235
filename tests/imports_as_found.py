"""``sys.path`` and ``sys.modules`` left as they were found by code that imports modules it
wrote in a temporary folder (tests/conftest.py's ``tmp_imports`` fixture, and helpers that run a
project written in tmp_path). A module left behind is found by the next test of the worker that
imports the same name (session 53: test_prec53's ``sched.py`` shadowed the standard library's
for the tests after it); under ``-n 2`` which test comes next changes from run to run."""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from pathlib import Path
from typing import Iterator


def _written_by_a_test(module: object, roots: tuple[str, ...]) -> bool:
    """Whether a new ``sys.modules`` entry is a module imported from one of ``roots`` (file or
    package folder) or a stand-in no import made (not a module, or a top-level module without a
    spec: ``types.ModuleType("settings")``)."""
    if not isinstance(module, types.ModuleType):
        return True
    if module.__spec__ is None:
        return "." not in module.__name__ and not getattr(module, "__file__", None)
    places = [getattr(module, "__file__", None) or "", *(getattr(module, "__path__", None) or ())]
    return any(os.path.realpath(p).startswith(roots) for p in places if isinstance(p, str) and p)


@contextlib.contextmanager
def imports_as_found(first: Path, *temporary: Path) -> Iterator[Path]:
    """``first`` put first on ``sys.path`` for code that imports modules written there (or in
    any folder it puts on ``sys.path``); afterwards ``sys.path`` and ``sys.modules`` are as they
    were: every module imported from a folder added to ``sys.path``, from ``first`` or from
    ``temporary`` is gone (the next test imports its own ``net``, ``models``, ``engine``), every
    entry replaced or removed is back (the standard library's ``sched`` that a ``sched.py``
    shadowed), a stand-in set is gone, and the modules imported for the first time from
    anywhere else (torch's lazy submodules) stay."""
    path, modules = list(sys.path), dict(sys.modules)
    sys.path.insert(0, str(first))
    importlib.invalidate_caches()
    try:
        yield first
    finally:
        added = [p for p in sys.path if p not in path]
        roots = tuple({os.path.join(os.path.realpath(p), "")
                       for p in (*added, first, *temporary)})
        sys.path[:] = path
        for p in added:
            sys.path_importer_cache.pop(p, None)
        for name, module in list(sys.modules.items()):
            if name not in modules and _written_by_a_test(module, roots):
                del sys.modules[name]
        for name, module in modules.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
        importlib.invalidate_caches()
