"""speed37b: the engine's cheaper steps keep what the old ones did (NOTE [walked types]; a
visitor's findings before it raises)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rule import Rule


class CallProbe(Rule):
    """Reports every call of ``probe``, with the depth of enclosing expressions."""

    code = "GT992"
    name = "call-probe"
    message = "{depth}"
    triggers = ("probe",)
    examples = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        if isinstance(node.func, ast.Name) and node.func.id == "probe":
            yield self.report(node, ctx, depth=len(ctx.exprs))


class HalfCrash(Rule):
    """Yields one finding, then raises."""

    code = "GT993"
    name = "half-crash"
    message = "first"
    triggers = ("probe",)
    examples = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)
        raise ValueError("after one")


def test_a_node_of_a_class_made_later_is_still_walked():
    # NOTE [walked types]: the engine looks node types up in the set known at import; a
    # node of another class (a subclass made later) is walked as before, its children too
    class Wrapped(ast.Call):
        pass

    src = "x = g(f(probe(1)))\n"
    tree = ast.parse(src)
    outer = tree.body[0].value  # type: ignore[attr-defined]
    inner = outer.args[0]
    wrapped = Wrapped(func=inner.func, args=inner.args, keywords=inner.keywords)
    ast.copy_location(wrapped, inner)
    outer.args[0] = wrapped
    checker = FileChecker("t.py", src, tree, [CallProbe()])
    assert [(f.line, f.message) for f in checker.run()] == [(1, "3")]
    # the same tree without the subclass: the same finding, at the same depth
    plain = FileChecker("t.py", src, ast.parse(src), [CallProbe()])
    assert [(f.line, f.message) for f in plain.run()] == [(1, "3")]


def test_findings_yielded_before_a_crash_are_kept(monkeypatch):
    monkeypatch.delenv("GRADTRACE_STRICT", raising=False)
    src = "probe()\nprobe()\n"
    checker = FileChecker("t.py", src, ast.parse(src), [HalfCrash()])
    got = [(f.code, f.line) for f in checker.run()]
    # the first call: its finding, then the crash (GT002); the rule is not run again
    assert got == [("GT993", 1), ("GT002", 1)]
    assert len(checker.errors) == 1 and checker.errors[0].code == "GT993"
