"""Speed cuts of session 32 (speed32b) that must give the answers of the code they replace."""
from __future__ import annotations

import ast
import re

from gradtrace.lint.code_text import code_span, code_text
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rules.registration.containers import (
    CONTAINER_TEXT_RE, LOCAL_LIST_TEXT, PLAIN_TEXT_RE,
)

TEXTS = [
    "class A:\n    def f(self):\n        self.x = y\n\n\n        self.z = [1]\n",
    "class A:\n    def f(self):\n        self.x = y  # note\n        return 1",
    "x = 1\n\n\ny = (self\n.a)\nz = [\n    1,\n]\n",
    "a = 1\n",
    "",
]
# each pattern must hold at the end of the lines as at the end of a joined copy: `$`, `(?!=)`
PATTERNS = [CONTAINER_TEXT_RE, PLAIN_TEXT_RE, re.compile(r"[-+*/%@&|^<>\]][\s\\)#]*=(?!=)"),
            re.compile(r"y\s*$"), re.compile(r"\d\s*\Z")]


def _ctx(text: str):  # type: ignore[no-untyped-def]
    tree = ast.parse(text)
    return FileChecker("x.py", text, tree, [], code_text(text)).ctx


def test_code_span_is_the_joined_lines():
    """``ctx.code[a:b]`` is the lines ``first`` to ``last`` joined by ``\\n``, for every pair
    of lines (a last line with and without its break, empty lines, a line past the end),
    and a bounded search finds what a search of the joined copy finds."""
    for text in TEXTS:
        ctx = _ctx(text)
        n = len(ctx.code_lines)
        for first in range(1, n + 1):
            for last in range(first, n + 2):
                span = code_span(ctx, first, last)
                want = "\n".join(ctx.code_lines[first - 1:last])
                assert span is not None and ctx.code[span[0]:span[1]] == want, (text, first, last)
                for p in PATTERNS:
                    assert (p.search(ctx.code, *span) is None) == (p.search(want) is None), \
                        (text, first, last, p.pattern)
                assert (ctx.code.find(LOCAL_LIST_TEXT, *span) == -1) == (LOCAL_LIST_TEXT not in want)


def test_code_span_leaves_carriage_returns_to_the_caller():
    """A code with a ``\\r`` line end has no span: its callers join the lines as before."""
    for text in ("x = 1\r\ny = 2\r\n", "x = 1\ry = 2\n"):
        assert code_span(_ctx(text), 1, 2) is None


def test_line_starts_from_the_code_lines():
    """``line_starts`` built from ``ctx.code_lines`` gives the starts the split of the text
    gave (a final break or none, empty lines, an empty file)."""
    import itertools

    from gradtrace.lint.code_text import line_starts
    for text in [*TEXTS, "\n", "\n\nx = 1", "x = 1\n\n\n"]:
        ctx = _ctx(text)
        code = ctx.code
        ends = list(itertools.accumulate(map((1).__add__, map(len, code.split("\n")[:-1]))))
        if code and code[-1] not in "\r\n":
            ends.append(len(code))
        assert line_starts(ctx) == [0, 0, *ends], text
