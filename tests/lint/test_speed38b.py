"""speed38b: GT546's `_stored_params` reads `__init__`'s assignments from the cheap stack walk
of the bodies and keeps the breadth-first walk's answer: a parameter stored under two names
keeps the first one of the breadth-first order (the fallback), the rest is the same mapping."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.rules.registration.passed_twice import _stored_first, _stored_params

# `p` is stored in the `if` arm first in source (and stack-walk) order, at the top level
# first in breadth-first order: the breadth-first answer (`outer`) is the one kept
SRC = textwrap.dedent("""
    import torch.nn as nn
    class Layer(nn.Module):
        def __init__(self, p, q, flag=False):
            super().__init__()
            if flag:
                self.inner = p
            self.outer = p
            self.other = q
            self.again = q
    m = nn.Linear(4, 4)
    layer = Layer(m, m)
    """)


def _classes(src: str) -> list[ast.ClassDef]:
    return [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ClassDef)]


def test_stored_twice_keeps_breadth_first() -> None:
    (cls,) = _classes(SRC)
    assert _stored_params(cls) == {"p": "outer", "q": "other"}  # fails without the fallback


def test_finding_names_breadth_first_slot() -> None:
    found = check_source(SRC, select=["GT546"])
    assert [(f.code, f.line) for f in found] == [("GT546", 12)]
    assert "`self.outer`" in found[0].message and "`self.inner`" not in found[0].message


def test_same_mapping_as_breadth_first() -> None:
    src = textwrap.dedent("""
        class A:
            def __init__(self, a, b, *, c):
                self.x = a
                for _ in range(2):
                    self.y = b
                    def inner(d):
                        self.z = c
                self.w = self
                self.v = a.attr
        class B:
            def method(self, a):
                self.x = a
        """)
    for cls in _classes(src):
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef)
                     and s.name == "__init__"), None)
        want = {} if init is None else _stored_first(init, {
            a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)})
        assert _stored_params(cls) == want
    assert _stored_params(_classes(src)[0]) == {"a": "x", "b": "y", "c": "z", "self": "w"}
