"""Speed cuts of session 32 (speed32b) that must give the answers of the code they replace."""
from __future__ import annotations

import ast
import itertools

from gradtrace.lint.code_text import code_text, line_starts
from gradtrace.lint.engine import FileChecker

TEXTS = [
    "class A:\n    def f(self):\n        self.x = y\n\n\n        self.z = [1]\n",
    "class A:\n    def f(self):\n        self.x = y  # note\n        return 1",
    "x = 1\n\n\ny = (self\n.a)\nz = [\n    1,\n]\n",
    "a = 1\n",
    "",
]


def _ctx(text: str):  # type: ignore[no-untyped-def]
    tree = ast.parse(text)
    return FileChecker("x.py", text, tree, [], code_text(text)).ctx


def test_line_starts_from_the_code_lines():
    """``line_starts`` built from ``ctx.code_lines`` gives the starts the split of the text
    gave (a final break or none, empty lines, an empty file)."""
    for text in [*TEXTS, "\n", "\n\nx = 1", "x = 1\n\n\n"]:
        ctx = _ctx(text)
        code = ctx.code
        ends = list(itertools.accumulate(map((1).__add__, map(len, code.split("\n")[:-1]))))
        if code and code[-1] not in "\r\n":
            ends.append(len(code))
        assert line_starts(ctx) == [0, 0, *ends], text
