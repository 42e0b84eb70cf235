"""Session 28 engine cuts: exact, the same visits with less walking."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rule import Rule
from gradtrace.lint.visitors import KEYWORDS


class EveryStatement(Rule):
    """Reports every class, function, loop, with, if, return, raise and del it is shown
    (``gate_statements = False``: it must see all of them in an active file)."""

    code = "GT993"
    name = "every-statement"
    message = "seen"
    triggers = ("probe",)
    examples = []

    def visit_ClassDef(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_For = visit_AsyncFor = visit_ClassDef
    visit_While = visit_With = visit_AsyncWith = visit_If = visit_ClassDef
    visit_Return = visit_Raise = visit_Delete = visit_ClassDef


class EveryAssign(EveryStatement):
    """Also every assignment: a type without a keyword, so nothing is skipped."""

    code = "GT994"
    name = "every-assign"

    def visit_Assign(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


SRC = """\
import torch
probe = 1
def quiet(x):
    y = x
    class Inner:
        pass
    for i in x:
        y = i
    while y:
        with y:
            y = 0
    if x:
        y = 1
    elif y:
        del y
    else:
        raise ValueError
    return y
async \\
  def later(x):
    async for a in x:
        async with a:
            pass
@decorated
class Outer:
    def method(self):
        self.a = 1
def helper_with_forward():
    z = [q for q in range(3)]
    return z
"""


def _seen(rule: type[Rule], src: str) -> tuple[list[tuple[int, str]], FileChecker]:
    checker = FileChecker("t.py", src, ast.parse(src), [rule()])
    found = checker.run()
    return sorted((f.line, f.code) for f in found), checker


def _statements(src: str, types: tuple[type, ...]) -> list[int]:
    return sorted(n.lineno for n in ast.walk(ast.parse(src)) if isinstance(n, types))


def test_ungated_statement_visitors_see_every_statement_of_their_types():
    """NOTE [keyword lines]: the keyword lines open the subtrees holding such a statement."""
    seen, checker = _seen(EveryStatement, SRC)
    assert checker._skip_quiet  # the file is walked with quiet subtrees skipped
    want = _statements(SRC, tuple(KEYWORDS))
    assert [line for line, _ in seen] == want
    assert 19 in want and 25 in want  # `async \` + `def`; a decorated class


def test_a_type_without_keyword_still_walks_every_statement():
    seen, checker = _seen(EveryAssign, SRC)
    assert not checker._skip_quiet
    want = _statements(SRC, (*KEYWORDS, ast.Assign))
    assert [line for line, _ in seen] == want


def test_keyword_lines_are_whole_words_of_the_code():
    """``for`` inside ``forward``, ``if`` in ``elif``-less text, a keyword in a string or a
    comment: no statement, and none is missed."""
    src = """\
import torch
probe = 1
def forward_only(x):
    s = "for while with class def"  # for class
    return s
"""
    seen, _ = _seen(EveryStatement, src)
    assert seen == [(3, "GT993"), (5, "GT993")]


class Counted(EveryStatement):
    """Counts its instances."""

    code = "GT995"
    name = "counted"
    triggers = ("absent_word",)
    made = 0

    def __init__(self) -> None:
        type(self).made += 1


def test_only_the_rules_active_in_a_file_are_made_from_classes():
    """``FileChecker`` takes rule classes and makes only the active ones; the same findings
    as with instances; a rule none of whose trigger words is found is not visited."""
    Counted.made = 0
    checker = FileChecker("t.py", SRC, ast.parse(SRC), [Counted, EveryStatement])
    found = checker.run()
    assert Counted.made == 0 and [type(r) for r in checker.rules] == [EveryStatement]
    assert found == _seen(EveryStatement, SRC)[1].findings
