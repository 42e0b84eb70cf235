"""Speed cuts of session 24 (speed25) that must give the answers of the code they replace."""
from __future__ import annotations

import ast
import random
import re
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.context import FUNCTION_TYPES
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.nodes import children
from gradtrace.lint.rules.numerics.singleton import call_lines
from gradtrace.lint.rules.registration._callers import class_calls


def _ctx(text: str, tree: ast.Module | None = None):  # type: ignore[no-untyped-def]
    return FileChecker("x.py", text, tree or ast.parse("pass"), [], text).ctx


def test_call_lines_are_the_lines_a_search_per_line_finds():
    """GT762/GT763's ``named_calls``: one pass over the code for the names, then a search of
    the lines where one starts a word, gives the lines a search of every line gives (names
    that are prefixes of each other, a name inside a longer word, a break between the name and
    `(`, lines ending in \\n, \\r\\n and a lone \\r, a non-ASCII word character)."""
    pieces = ["crit(x)", "crit (y)", "xcrit(z)", "crit\n(", "a = crit", "loss_fn(1)",
              "crit_b(2)", "self.crit(", "\r", "\r\n", "\n", " ", "crit", "(", "\u00e9",
              "loss_fnx(", "loss_fn\t("]
    rng = random.Random(25)
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 40)))
        names = set(rng.sample(["crit", "loss_fn", "crit_b", "c"], rng.randrange(1, 4)))
        ctx = _ctx(text)
        called = re.compile(r"\b(?:%s)\s*\(" % "|".join(map(re.escape, sorted(names))))
        old = [i for i, ln in enumerate(ctx.code_lines, 1) if called.search(ln)]
        assert call_lines(ctx, names) == old, (text, names)


def _walk_calls(tree: ast.Module, cls: str) -> list[tuple[ast.AST, ast.Call]]:
    """The unguided walk of the per-class ``class_calls`` it replaced."""
    out: list[tuple[ast.AST, ast.Call]] = []
    stack: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while stack:
        owner, n = stack.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == cls:
            out.append((owner, n))
        inner = n if isinstance(n, FUNCTION_TYPES) else owner
        stack.extend((inner, c) for c in children(n))
    return out


SOURCE = textwrap.dedent("""
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, layers):
            super().__init__()
            self.layers = layers

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Block([nn.Linear(2, 2)])
            self.b = Block(
                [nn.Linear(2, 2), Head2()])

    class Head2(nn.Module):
        pass

    def build():
        blocks = [Block([nn.Linear(1, 1)]) for _ in range(2)]
        if blocks:
            return Head(), Block(blocks), lambda: Head2()
        try:
            x = Block([])
        except ValueError:
            x = Head2()
        return x

    net = Block([Head(), Head2()])
    """)


def test_class_calls_of_one_walk_are_each_class_walk():
    """GT401's ``class_calls``: the calls of every class, found in one walk guided by the
    lines naming any class, are each class's calls in the order of a full walk."""
    tree = ast.parse(SOURCE)
    ctx = _ctx(SOURCE, tree)
    for cls in ("Block", "Head", "Head2", "Missing"):
        got = [(id(o), id(c)) for o, c in class_calls(ctx, cls)]
        want = [(id(o), id(c)) for o, c in _walk_calls(tree, cls)] \
            if cls in ctx.analysis.classes else []
        assert got == want, cls
    assert len(class_calls(ctx, "Block")) == 6


def test_saved_input_gate_keeps_the_write_of_a_saved_name():
    """GT605: the write is still found when the op saving the name is the only op of the
    function naming it; a write into a name no op of the function takes stays silent."""
    bad = textwrap.dedent("""
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(4)

            def forward(self, x):
                y = self.norm(x)
                x += 1
                return x + y
        """)
    good = bad.replace("y = self.norm(x)\n        x += 1", "y = self.norm(x)\n        z = x + 0\n"
                       "        z += 1")
    assert [(f.code, f.line) for f in check_source(bad, select=["GT605"])] == [("GT605", 11)]
    assert check_source(good, select=["GT605"]) == []
