"""Session 30 engine cuts: exact, the same word lines and the same visits for less work."""
from __future__ import annotations

import ast
import random
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint import words as W
from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rule import Rule


def test_scan_branches_find_every_word_where_the_scans_do() -> None:
    """NOTE [scan branches]: one branch per first character, and the words led by white
    space found apart, give the lines of a scan for each word."""
    words = frozenset({" - ", " *", "  ", "- ", "* [", "** 0.5", "*=", "] *", "] =", "_(",
                       "*", "a", "a_(", ".T", ".t()", "id(p"})
    assert W._scan_lines("x = a - b\n", words) == W.word_lines("x = a - b\n", words)
    rng = random.Random(30)
    for _ in range(3000):
        text = "".join(rng.choice("*[]= _(0.5a-.Ttidp\n") for _ in range(rng.randint(0, 30)))
        assert W._scan_lines(text, words) == W.word_lines(text, words), text
    only_spaced = frozenset({" - ", " ="})
    assert W._scan_lines("a - b\nc = d - e\n", only_spaced) == {" - ": {1, 2}, " =": {2}}


def _codes() -> list[str]:
    rng = random.Random(31)
    pieces = ["for x in y:", "    loss += 1", "    a[0] = b", "def forward(self):",
              "    return x.T", "zero_grad()", "    x.add_(1)", "", "    pass", "formula = 1"]
    return ["\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
            for _ in range(200)]


def test_line_cache_gives_the_lines_of_the_token_search() -> None:
    """NOTE [line cache]: cold, warm, with repeated lines in a file and across files, and
    past the table's limit, the word lines are those of :func:`token_word_lines`."""
    words = frozenset({"loss", "+=", "] =", ".T", "_(", "forward", "zero_grad", "x"})
    runs = frozenset({"for", "def"})
    W._line_table(words, runs).clear()
    limit = W.LINE_LIMIT
    try:
        for W.LINE_LIMIT in (limit, 3):
            for _ in range(2):
                for text in _codes():
                    want = W.token_word_lines(text, words, runs)
                    assert want is not None
                    assert W.line_word_lines(text, words, runs) == want[0], text
    finally:
        W.LINE_LIMIT = limit
        W._line_table(words, runs).clear()
    assert W.line_word_lines("x = 1\r\n", words) is None  # as token_word_lines: other ends
    assert W.line_word_lines("x = 'é'\n", words) is None
    assert W.line_word_lines("a\nb\n", frozenset({"a\nb"})) is None  # a word over two lines


class EveryAugAssign(Rule):
    """Reports every augmented assignment (``gate_statements = False``)."""

    code = "GT996"
    name = "every-aug-assign"
    message = "seen"
    triggers = ("probe",)
    examples = []

    def visit_AugAssign(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


AUG = """\
import torch
probe = 1
def quiet(x):
    y = x
    return y
def one(x):
    x //= 2
    return x
class Holder:
    def two(self, x):
        x **= 2
        if x:
            x >>= 1
        return x
    def three(self, x):
        s = "+= -= *="  # x += 1
        return s
def four(x, y):
    x[
        0
    ] @= y
    y \\
        ^= x
    return x
"""


def test_augmented_assignments_are_keyword_lines() -> None:
    """NOTE [keyword lines]: an ungated ``visit_AugAssign`` leaves the quiet-subtree skip on
    and still sees every augmented assignment (``//=``, ``**=``, an operator on a
    continuation line); operators in a string or a comment open nothing that matters."""
    checker = FileChecker("t.py", AUG, ast.parse(AUG), [EveryAugAssign()])
    found = sorted(f.line for f in checker.run())
    assert checker._skip_quiet
    want = sorted(n.lineno for n in ast.walk(ast.parse(AUG)) if isinstance(n, ast.AugAssign))
    assert found == want == [7, 11, 13, 19, 22]
