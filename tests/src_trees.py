"""Source files of gradtrace parsed once per test process, for the tests that read all of src/
(or lint/rules) with ``ast`` instead of importing it: test_env.py, test_layout.py,
runtime/test_codes.py, lint/test_registry.py. Each parsed all of it again (a parse of src/ is
3-5 s of CPU); they are one xdist group (``GROUP``), so under ``-n 2`` one worker runs them one
after the other and parses each file once. The trees are shared: a caller must not change them.
tests/conftest.py drops them (:func:`release`) after the group's last test: kept, the ~1M nodes
(200 MB) would slow every later full garbage collection of the worker, pytest's five at its
exit included."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

GROUP = "src_trees"


def tree(path: Path) -> ast.Module:
    """The module at ``path`` (UTF-8), parsed on the first call for that file."""
    return _parsed(Path(path).resolve())


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def release() -> None:
    """Forget every parsed file (the next :func:`tree` parses again)."""
    _parsed.cache_clear()
