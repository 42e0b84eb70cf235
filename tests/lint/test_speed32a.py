"""speed32a: the engine's set-up built once per process, `Context.mentions` without the
identifiers, the outermost functions, one-line statements' rule look-ups."""
from __future__ import annotations

import ast
import random
import textwrap
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.function_gate import outer_functions
from gradtrace.lint.names import Imports
from gradtrace.lint.rule import Rule

SRC = textwrap.dedent('''
    import torch
    import numpy as npx

    @torch.no_grad()
    def top(x):
        def inner(y):
            return y.add_(1)
        return inner(x)

    class M(torch.nn.Module):
        if True:
            def forward(self, x):
                probe = torch.relu(x)
                return x.add_(
                    probe)
        else:
            pass
        try:
            async def later(self):
                pass
        except ValueError:
            def fallback(self): pass
        finally:
            x = 1

    match 1:
        case 1:
            def matched(): pass

    for i in range(2):
        while i:
            with open("f") as fh:
                def deep(): probe(1)
            break
''')


def test_outer_functions_are_every_def_no_def_holds() -> None:
    tree = ast.parse(SRC)
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inner = {id(m) for d in defs for m in ast.walk(d) if m is not d
             and isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    want = sorted((min([d.lineno, *(x.lineno for x in d.decorator_list)]), d.end_lineno)
                  for d in defs if id(d) not in inner)
    assert outer_functions(tree) == want
    assert len(want) == 6


def test_mentions_is_the_same_with_or_without_the_identifiers() -> None:
    rnd = random.Random(32)
    tree = ast.parse(SRC)
    code = SRC.replace('"f"', '""')
    words = ["probe", "add_(", "torch.nn", "npx", "numpy", "zero_grad", "relu(x", "no_grad()",
             "forward(self", "1)", "absent", "_(", "e.a", "(\n"]
    for _ in range(20):
        asked = rnd.sample(words, 6)
        plain = Context("f.py", SRC, tree, Imports(), code)
        built = Context("f.py", SRC, tree, Imports(), code)
        assert built.identifiers is not None  # built first: the prefilter is used
        for w in asked:
            assert plain.mentions(w) == built.mentions(w) == (w in code), w
        assert plain._idents is False  # mentions alone never built them
        plain.release(), built.release()


class _Calls(Rule):
    code = "GT993"
    name = "probe"
    message = "seen"
    triggers = ("probe",)
    examples = []

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


class _Gated(_Calls):
    code = "GT994"
    gate_statements = True

    def visit_Return(self, node: ast.Return, ctx: Context) -> Iterator[Finding]:
        yield self.report(node, ctx)


def _found(rules: list) -> list[tuple[str, int]]:
    tree = ast.parse(SRC)
    checker = FileChecker("f.py", SRC, tree, rules)
    try:
        return sorted((f.code, f.line) for f in checker.run())
    finally:
        checker.ctx.release()


def test_one_and_many_line_statements_and_rule_instances_or_classes() -> None:
    """Calls on one-line statements holding the word (lines 14, 34), a call whose statement
    holds it on its second line only (`x.add_(` then `probe)`), a gated `return` over two
    lines: the same with rule classes (made by the engine) as with instances."""
    want = [("GT993", 14), ("GT993", 15), ("GT993", 34),
            ("GT994", 14), ("GT994", 15), ("GT994", 15), ("GT994", 34)]
    assert _found([_Calls, _Gated]) == _found([_Calls(), _Gated()]) == want
