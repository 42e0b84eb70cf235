"""The word gates rules test before building a function's data flow (NOTE [word gates]):
they may say yes too often, never no; comments and strings do not count."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports
from gradtrace.lint.rules._gates import file_says, says_all

SRC = '''
import torch

def train(opt_g, opt_d, loss):
    opt_g.zero_grad()
    loss.backward()
    opt_d.step()

@torch.no_grad()
def only_in_comments(opt):  # zero_grad, backward
    "step"
    opt.step()

class T:
    def fit(self, loss):
        self.opt.zero_grad(); loss.backward(); self.opt.step()
'''
WORDS = ("zero_grad", "backward", "step")


def _ctx(src: str) -> tuple[Context, dict[str, ast.AST]]:
    text = textwrap.dedent(src)
    tree = ast.parse(text)
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    return Context("m.py", text, tree, Imports()), defs


def test_gate_reads_the_lines_of_the_function_in_code() -> None:
    ctx, defs = _ctx(SRC)
    assert says_all(ctx, defs["train"], WORDS)
    assert says_all(ctx, defs["fit"], WORDS)
    assert not says_all(ctx, defs["only_in_comments"], WORDS)  # words in a comment / string
    assert says_all(ctx, defs["only_in_comments"], ("step", "no_grad"))  # decorator lines count
    assert says_all(ctx, ctx.tree, WORDS)
    assert not says_all(ctx, ctx.tree, ("zero_grad", "autograd"))
    assert file_says(ctx, "zero_grad") and not file_says(ctx, "requires_grad")


def test_gate_says_yes_when_names_may_be_normalised() -> None:
    ctx, defs = _ctx(SRC + "\nπ = 1\n")
    assert says_all(ctx, defs["only_in_comments"], WORDS)
    assert file_says(ctx, "requires_grad")


def test_word_search_finds_every_word_on_its_lines_without_a_tiny_needle() -> None:
    from gradtrace.lint.code_text import code_text, identifiers
    from gradtrace.lint.registry import all_rules
    from gradtrace.lint.words import search_plan, word_lines

    words = frozenset(w for r in all_rules() for w in (*r.triggers, *r.statement_triggers))
    assert "_(" in words  # GT's in-place trigger: its stem `_` must not become a needle
    plan = search_plan(words | {"_("})
    # NOTE [word search]: a needle shorter than 3 characters is only ever its own word
    assert [n for n, members in plan if len(n) < 3 and [w for w, _ in members] != [n]] == []
    code = code_text(textwrap.dedent(SRC) + "x.add_(1); p.requires_grad_(False)\nact_fn(y)\n")
    naive = {w: {i for i, line in enumerate(code.split("\n"), 1) if w in line} for w in words}
    naive = {w: ls for w, ls in naive.items() if ls}
    for idents in (None, identifiers(code)):
        assert word_lines(code, words, idents) == naive
    assert naive["_("] == {17} and naive["zero_grad"] == {5, 16}


def test_token_lines_are_the_scans_lines() -> None:
    """NOTE [token lines]: the same lines as the scans (substring meaning: `add` in
    `padding`, `out =` only where written so, `+=` scanned), the file's identifiers with
    them, and no answer for code the index would misread (a lone \\r, non-ASCII)."""
    from gradtrace.lint.code_text import code_text, identifiers
    from gradtrace.lint.registry import all_rules
    from gradtrace.lint.words import token_word_lines, word_lines

    words = frozenset(w for r in all_rules() for w in (*r.triggers, *r.statement_triggers))
    words |= {"import", "add", "out =", "+=", "] =", ".backward(", "_("}
    code = code_text(textwrap.dedent(SRC) + (
        "x = self.padding(h)  # add\ny = addr.add_(1); out = f(out=out)\nw += 1; b[0] = z\n"
        "z = pad_add\n"))
    naive = {w: {i for i, line in enumerate(code.split("\n"), 1) if w in line} for w in words}
    naive = {w: ls for w, ls in naive.items() if ls}
    got, idents = token_word_lines(code, words)  # type: ignore[misc]
    assert got == naive == word_lines(code, words, identifiers(code))
    assert naive["add"] == {17, 18, 20} and naive["out ="] == {18} and naive["+="] == {19}
    assert sorted(idents.split()) == sorted(identifiers(code).split())  # type: ignore[union-attr]
    assert token_word_lines("x = 1\r\ny.add(2)\r", words) is None
    assert token_word_lines("π = 1\n", words) is None


def test_remembered_runs_give_the_lines_of_a_fresh_search() -> None:
    """NOTE [held needles]: runs met in an earlier file are not searched again; their
    remembered needles give the same lines as the scans, also after the table is dropped."""
    import random

    from gradtrace.lint import words as W

    vocab = ["add", "padding", "pad_add", "out", "outer", "backward", "x", "self", "loss_fn"]
    words = frozenset({"add", "out =", ".backward(", "loss", "+=", "pad"})
    rng = random.Random(3)
    W._held(words).clear()
    limit, least = W.HELD_LIMIT, W.HELD_MIN
    W.HELD_MIN = 1  # six words: remembered too (a narrow selection searches the runs)
    try:
        for k in range(200):
            if k == 100:
                W.HELD_LIMIT = 5  # the table is dropped and rebuilt
            code = "\n".join(" ".join(rng.choice(vocab) + rng.choice(["", " =", ".backward(",
                                                                        " += 1", "()"])
                                       for _ in range(rng.randint(0, 4)))
                              for _ in range(rng.randint(1, 6))) + "\n"
            got, _ = W.token_word_lines(code, words)  # type: ignore[misc]
            assert got == W.word_lines(code, words), code
            W.HELD_MIN = 10**6  # and searched in the joined runs, as for a narrow selection
            assert W.token_word_lines(code, words) == (got, _), code
            W.HELD_MIN = 1
        assert W._held(words)  # the remembered runs were used
    finally:
        W.HELD_LIMIT, W.HELD_MIN = limit, least
        W._held(words).clear()
    assert W._held(words) == {}


def test_one_pass_finds_every_short_word_where_the_scans_do() -> None:
    """NOTE [token lines]: words that start inside a match (`*=` in `] *=`), are a prefix of
    it or repeat inside it are found too: the lines of a scan for each word."""
    import random

    from gradtrace.lint.words import _scan_lines, word_lines

    words = frozenset({"* [", "** 0.5", "**0.5", "*=", "*[", "+=", "-=", "/=", "] *", "] =",
                       "]*", "]=", "_(", "*", "**", "a", "aa", "a_("})
    assert _scan_lines("y[i] *= 2\n", words) == word_lines("y[i] *= 2\n", words) == {
        "] *": {1}, "*=": {1}, "*": {1}}
    rng = random.Random(12)
    for _ in range(3000):
        text = "".join(rng.choice("*[]= _(0.5a+-/\n") for _ in range(rng.randint(0, 30)))
        assert _scan_lines(text, words) == word_lines(text, words), text
