"""speed31a: what the engine's walk enters (NOTE [function requires], NOTE [quiet subtrees],
NOTE [leaf lines], NOTE [gated lines])."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rule import Rule


class _Probe(Rule):
    name = "probe"
    message = "seen"
    triggers = ("probe",)
    examples = []


class AssignsInSplitFunctions(_Probe):
    """A ``"function"`` rule with ``function_requires``: every assignment it is shown."""

    code = "GT991"
    gate_statements = "function"
    function_requires = ("chunk",)

    def visit_Assign(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


class AssignsAnywhere(_Probe):
    """The same without ``function_requires``: it sees every statement outside functions."""

    code = "GT992"
    gate_statements = "function"

    def visit_Assign(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


class GatedReturns(_Probe):
    """A gated statement rule: the returns whose lines hold ``probe``."""

    code = "GT993"
    gate_statements = True

    def visit_Return(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


class Calls(_Probe):
    """An expression rule: the calls on lines holding ``f(``."""

    code = "GT994"
    triggers = ("f(",)

    def visit_Call(self, node: ast.AST, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


SRC = """\
import torch
a = probe
class Holder:
    b = probe
    def split(self, x):
        q, k = x.chunk(2)
        q = probe
        print(x)
        return q
def other(x):
    c = probe
    return c
def calls(x):
    d = probe
    e = f(probe)
    return probe
"""


def _lines(rules: list[Rule]) -> tuple[list[tuple[str, int]], list[int]]:
    """(code and line of each finding, lines of the statements the walk entered)."""
    checker = FileChecker("t.py", SRC, ast.parse(SRC), rules)
    walked: list[int] = []
    walk = checker._walk_stmt

    def counted(s: ast.AST) -> None:
        walked.append(s.lineno)  # type: ignore[attr-defined]
        walk(s)

    checker._walk_stmt = counted  # type: ignore[method-assign]
    return sorted((f.code, f.line) for f in checker.run()), sorted(walked)


def test_function_requires_closes_the_module_level() -> None:
    """NOTE [function requires]: the rule is called only in the function holding ``chunk``,
    and the module level and class bodies are not opened for it; a ``"function"`` rule
    without ``function_requires`` still sees every statement outside functions."""
    found, walked = _lines([AssignsInSplitFunctions()])
    assert found == [("GT991", 6), ("GT991", 7)]
    assert 2 not in walked and 4 not in walked
    found, walked = _lines([AssignsAnywhere()])
    assert found == [("GT992", 2), ("GT992", 4), ("GT992", 6), ("GT992", 7), ("GT992", 11),
                     ("GT992", 14), ("GT992", 15)]


def test_open_function_skips_quiet_statements_nobody_visits() -> None:
    """NOTE [quiet subtrees]: in the open function, the quiet ``print(x)`` and ``return q``
    (no rule visits an expression statement or a return there) are not entered; the quiet
    assignment ``q, k = ...`` is (the rule visits assignments)."""
    _, walked = _lines([AssignsInSplitFunctions()])
    assert 6 in walked and 8 not in walked and 9 not in walked


def test_leaf_statements_walked_only_where_a_rule_can_run() -> None:
    """NOTE [leaf lines]: ``c = probe`` holds a trigger word, but no rule looks at it (the
    gated rule visits returns, the expression rule's word is ``f(``): not entered; the
    returns and the calls are found as before, and an assignment rule still sees it."""
    found, walked = _lines([GatedReturns(), Calls()])
    assert found == [("GT993", 16), ("GT994", 15)]
    assert not {2, 4, 7, 11, 14} & set(walked)
    assert 15 in walked and 16 in walked
    found, walked = _lines([GatedReturns(), Calls(), AssignsAnywhere()])
    assert ("GT992", 11) in found and ("GT993", 16) in found and 11 in walked
