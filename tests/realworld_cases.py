"""benchmarks/realworld.py's ``load_cases()`` once per test run instead of once per xdist worker.

Loading the real-world corpus (each case read, parsed for its header and tokenized for its
markers) is ~2.6 s of CPU, paid at collection by every worker that collects
tests/realworld/test_realworld.py. Under xdist the controller loads it once before it starts the
workers (tests/conftest.py ``pytest_xdist_setupnodes``) and writes it to a file the workers
inherit through ``ENV``; a worker uses it only when its key, a hash of benchmarks/realworld.py
and of every file under the cases folder (names and bytes), equals the one of the tree it
reads now, and otherwise (no file, another tree, a case added or edited) loads the corpus
itself. Without xdist nothing is written: ``load_cases()`` is the benchmark's own.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = "GRADTRACE_TESTS_REALWORLD_CASES"
# the tests that load the corpus (a run that collects neither does not pay for it)
USERS = ("tests/realworld/test_realworld.py", "tests/lint/test_speed45.py")


def bench():
    """benchmarks/realworld.py as module ``realworld_bench`` (its dataclasses look it up there)."""
    if "realworld_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location("realworld_bench",
                                                      REPO / "benchmarks" / "realworld.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["realworld_bench"] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return sys.modules["realworld_bench"]


def _key() -> str:
    """A hash of the loader's source and of every file under the cases folder."""
    rw = bench()
    digest = hashlib.sha256(Path(rw.__file__).read_bytes())
    for root, dirs, files in os.walk(rw.CASES):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            digest.update(os.path.relpath(full, rw.CASES).encode() + b"\0")
            with open(full, "rb") as fh:
                digest.update(fh.read())
            digest.update(b"\0")
    return digest.hexdigest()


def load_cases():
    """``realworld_bench.load_cases()``, from the controller's file when it is of this tree."""
    rw = bench()
    path = os.environ.get(ENV)
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
        if saved["key"] == _key():
            return [rw.Case(**fields) for fields in saved["cases"]]
    return rw.load_cases()


def wanted(args: list[str], rootdir: Path) -> bool:
    """Whether a run of ``args`` (pytest's paths, relative to ``rootdir``) collects a user."""
    users = [(REPO / u).resolve() for u in USERS]
    for arg in args or ["."]:
        target = (rootdir / arg.split("::", 1)[0]).resolve()
        if any(u == target or target in u.parents for u in users):
            return True
    return False


def write_for_workers() -> str:
    """Load the corpus, write it for the workers, point ``ENV`` at it; returns the file."""
    cases = bench().load_cases()
    fd, path = tempfile.mkstemp(prefix="gradtrace_realworld_", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"key": _key(), "cases": [dataclasses.asdict(c) for c in cases]}, fh)
    os.environ[ENV] = path
    return path
