"""speed38: a cheaper answer to "is this called name undefined?" keeps the whole-file answer
(`analysis.undefined.is_undefined` against `undefined_names`), and skips the file walk for the
names the file's imports, top-level functions or the builtins bind."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint.analysis.undefined import is_undefined, undefined_names
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports

SRC = textwrap.dedent("""
    import os.path
    import numpy as np
    from torch import nn as tnn
    from . import sibling
    from .pkg import helper as hp

    def top():
        pass

    class Top:
        pass

    def f(param):
        import json
        def inner():
            pass
        param(); os(); np(); tnn(); sibling(); hp(); top(); Top(); inner(); json()
        len(); missing(); also_missing()
        for k in range(2):
            k()
        try:
            pass
        except Exception as err:
            err()
    """)


def _context(src: str) -> Context:
    tree = ast.parse(src)
    imports = Imports()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            imports.add(n)
    return Context("t.py", src, tree, imports)


def _called(ctx: Context) -> list[str]:
    return [n.func.id for n in ast.walk(ctx.tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def test_is_undefined_gives_the_whole_file_answer():
    ctx = _context(SRC)
    names = _called(ctx)
    assert {"missing", "also_missing", "param", "k", "err", "os", "len"} <= set(names)
    got = {n for n in names if is_undefined(ctx, n)}
    assert got == {"missing", "also_missing"}
    assert got == {n for n in names if n in undefined_names(ctx)}


def test_bound_names_are_answered_without_the_file_walk():
    ctx = _context(SRC)
    for name in ("os", "np", "tnn", "sibling", "hp", "json", "top", "len", "print"):
        assert not is_undefined(ctx, name)
    assert ("undefined-names", id(ctx.tree)) not in ctx._memo  # never walked
    assert is_undefined(ctx, "missing")  # an unbound name: the walk decides
    assert ("undefined-names", id(ctx.tree)) in ctx._memo


def test_a_star_import_leaves_no_name_undefined():
    ctx = _context("from somewhere import *\n" + SRC)
    assert not any(is_undefined(ctx, n) for n in _called(ctx))
