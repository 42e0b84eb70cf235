"""Speed cuts of session 30 (speed30b) that must give the answers of the code they replace."""
from __future__ import annotations

import ast
import bisect
import re
import textwrap

import gradtrace.lint.rules.training_loop.init_graph as init_graph
from gradtrace.lint import check_source
from gradtrace.lint.analysis.trained_methods import SELF_ATTR_RE
from gradtrace.lint.code_text import code_text, line_starts
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rules.inplace.expanded_write import statements_holding
from gradtrace.lint.rules.numerics.singleton import call_lines

TEXTS = [
    "softmax(x)\ny = a.softmax (x)\nz = softmax\n(x)\nw = _softmax(x)\nsm(1); sm (2)\n",
    "x = 1\r\nsoftmax(2)\r\nq = my_softmax(3)\r\n",
    "℘x(1)\na = ℘x (2)\nb = a℘x(3)\nc = (℘x)(4)\n",
    "act(x); act_fn(y)\nself.act_fn (z)\nself.action(w)\n",
    "",
]
NAME_SETS = [{"softmax"}, {"sm", "softmax"}, {"℘x"}, {"act", "act_fn"}, {"a"}]


def _ctx(text: str):  # type: ignore[no-untyped-def]
    text = textwrap.dedent(text)
    tree = ast.parse(text)
    return FileChecker("x.py", text, tree, [], code_text(text)).ctx


def _regex_call_lines(ctx, names: set[str]) -> list[int]:  # type: ignore[no-untyped-def]
    """call_lines as it was: one pattern opening with ``\\b`` over the code."""
    alts = "|".join(map(re.escape, sorted(names)))
    called = re.compile(r"\b(?:%s)\s*\(" % alts)
    starts = line_starts(ctx)
    seen = sorted({bisect.bisect_right(starts, m.start()) - 1
                   for m in re.finditer(r"\b(?:%s)" % alts, ctx.code)})
    return [i for i in seen if called.search(ctx.code_lines[i - 1])]


def test_call_lines_as_the_word_pattern():
    """A name's word start is tested as ``\\b`` does (a name opening with a non-word
    character too), a call spelt over two lines is not on the name's line, ``\\r\\n`` ends
    a line."""
    for text in TEXTS:
        try:
            ctx = _ctx(text)
        except SyntaxError:  # (``℘`` is no identifier character on every Python)
            continue
        for names in NAME_SETS:
            assert call_lines(ctx, names) == _regex_call_lines(ctx, names), (text, names)
    assert call_lines(_ctx(TEXTS[0]), {"softmax"}) == [1, 2]


def test_statements_holding_every_line_of_the_words():
    """One scan per word gives the lines the pattern of alternatives gave, an occurrence
    inside another word's match included (it lies on that match's line)."""
    text = ("import torch\n"
            "def f(a, b):\n"
            "    x = a.expand_as(b).expand(3, 4)\n"
            "    y = torch.broadcast_to(a, (2, 2))\n"
            "    return x, y\n"
            "z = 1\n")
    ctx = _ctx(text)
    got = [(s.lineno, getattr(fn, "name", "<module>"))
           for s, fn in statements_holding(ctx, (".expand(", ".expand_as(", "broadcast_to("))]
    assert got == [(2, "<module>"), (3, "f"), (4, "f")]
    got = [s.lineno for s, _ in statements_holding(ctx, ("expand", "expand_as", "x"))]
    assert got == [2, 3, 5]


def test_self_attribute_pattern_as_the_word_pattern():
    """``self`` first, its word start tested after it: the matches of ``\\bself...``."""
    old = re.compile(r"\bself\s*\.\s*(\w+)")
    for s in ("self.a", "myself.self.b self . c", "x=self\n.d", "_self.e self_.f (self).g",
              "self", "selfself.h", "é.self.i éself.j", ".self.k"):
        assert SELF_ATTR_RE.findall(s) == old.findall(s), s


GT521_LIVE = """
    import torch
    import torch.nn as nn

    class Predictor(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.w = w

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.log_scale = nn.Parameter(torch.zeros(4))
            self.head = Predictor(w=self.log_scale)
            self.scale = torch.exp(self.log_scale)
            self.size = 4
            self.twice = int(self.size * 2)

        def forward(self, x):
            return self.head.w * x * self.scale
"""


def test_gt521_asks_the_kind_only_of_a_live_value(monkeypatch):
    """GT521 asks whether a value builds a module (the kind of its call) only when the value
    reaches a Parameter; the module built from one is still not reported, the exp is."""
    asked: list[int] = []
    real = init_graph._builds_module

    def spy(v, init, s, ctx):  # type: ignore[no-untyped-def]
        asked.append(s.lineno)
        return real(v, init, s, ctx)
    monkeypatch.setattr(init_graph, "_builds_module", spy)
    found = [(f.code, f.line) for f in check_source(textwrap.dedent(GT521_LIVE), "x.py")
             if f.code == "GT521"]
    assert found == [("GT521", 15)]
    assert sorted(set(asked)) == [14, 15]  # not `int(self.size * 2)`: no Parameter


LOSSES = """
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.crit = nn.CrossEntropyLoss()
            ce, nll = nn.CrossEntropyLoss(), nn.NLLLoss()
            self.pair = (ce, nll)

        def forward(self, x, y):
            a = self.crit(x.softmax(-1), y) + F.cross_entropy(x, y)
            b = F.nll_loss(x, y); c = F.kl_div(x, y)
            return a + b + c

    def loss_fn(x, y):
        return F.binary_cross_entropy_with_logits(x, y)
"""


def test_candidate_lines_by_scans_as_by_the_pattern(monkeypatch):
    """The loss lines found by one scan per word are those of the one pattern (forced)."""
    from gradtrace.lint.rules.numerics import _loss_lines
    ctx = _ctx(LOSSES)
    got = {getattr(k, "name", "<module>"): v
           for k, v in _loss_lines._candidate_lines(ctx.tree, ctx).items()}
    monkeypatch.setattr(_loss_lines, "FIND_WORDS", 0)
    ctx = _ctx(LOSSES)
    assert got == {getattr(k, "name", "<module>"): v
                   for k, v in _loss_lines._candidate_lines(ctx.tree, ctx).items()}
    assert got == {"__init__": {8, 9}, "forward": {13, 14}, "loss_fn": {18}}
