"""Session 36: the words of a rule that visits keyword statements only open only the subtrees
that spell one of those keywords (NOTE [nested keywords]); the same visits, fewer statements."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rule import Rule


class ProbeClass(Rule):
    """Reports every class whose lines hold ``probe`` (gated, ``visit_ClassDef`` only)."""

    code = "GT995"
    name = "probe-class"
    message = "seen"
    triggers = ("probe",)
    gate_statements = True
    examples = []

    def visit_ClassDef(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


class ProbeCall(Rule):
    """Reports every call of ``probe`` (an expression visitor: its words open any subtree)."""

    code = "GT994"
    name = "probe-call"
    message = "seen"
    triggers = ("probe",)
    gate_statements = True
    examples = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.func, ast.Name) and node.func.id == "probe":
            yield self.report(node, ctx)


SRC = """\
import torch
class Top:
    def run(self):
        return probe(1)
def plain(x):
    if x:
        y = probe(x)
        for i in y:
            probe(i)
    s = "class Fake: probe"  # class Fake: probe
    return s
def factory(x):
    if x:
        class Inner:
            def f(self):
                return probe(2)
        return Inner
    class Quiet:
        pass
    return probe
@probe
class Decorated:
    pass
"""


class Counting(FileChecker):
    """Records the first line of every statement the walk enters."""

    def _walk_stmt(self, s: ast.AST) -> None:
        self.walked.append(getattr(s, "lineno", 0))
        super()._walk_stmt(s)


def _run(rules: list[Rule]) -> tuple[list[int], list[int]]:
    checker = Counting("t.py", SRC, ast.parse(SRC), rules)
    checker.walked = []
    found = sorted(f.line for f in checker.run())
    return found, checker.walked


def test_class_rule_words_open_only_subtrees_spelling_class() -> None:
    """``probe`` opens the classes that hold it (``Top``, ``Inner`` inside a function's
    ``if``, ``Decorated`` by its decorator) and the statements on the way to them; ``plain``
    (``class`` only in a string and a comment) and the rest of ``factory`` are not entered."""
    found, walked = _run([ProbeClass()])
    assert found == [2, 14, 22]
    assert 5 not in walked and 6 not in walked  # `plain` and its `if`: no class keyword
    assert 12 in walked and 13 in walked  # `factory` and the `if` holding `class Inner`
    assert 18 not in walked and 20 not in walked  # `class Quiet` (no probe), `return probe`
    assert 3 not in walked  # `Top.run`: no class inside it


def test_an_expression_rule_with_the_same_word_still_opens_everything() -> None:
    """The twin: a rule with an expression visitor needs every statement holding its word,
    and the class rule still sees the same classes beside it."""
    found, walked = _run([ProbeClass(), ProbeCall()])
    assert found == [2, 4, 7, 9, 14, 16, 22]
    assert {3, 4, 5, 6, 7, 8, 9, 20}.issubset(walked)
