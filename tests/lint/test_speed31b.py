"""Speed cuts of session 31 (speed31b) that must give the answers of the code they replace."""
from __future__ import annotations

import ast
import bisect
import textwrap
from collections import Counter

from gradtrace.lint import check_source
from gradtrace.lint.analysis.calls import word_lines
from gradtrace.lint.call_words import CALLED_RE, call_counts, called_names, called_runs
from gradtrace.lint.code_text import LINE_END, code_text
from gradtrace.lint.engine import FileChecker
from gradtrace.lint.rules.inplace.multi_view import InplaceWriteToMultiOutputView
from gradtrace.lint.rules.registration._unused import DYNAMIC_RE, _dynamic

CALL_TEXTS = [
    "f(g(h(1)))\nx.y (z)\n foo(bar)(baz)\n",
    "a_b(\r\nc(\rd (e)\n",
    "é(1) + ü_x(2) + ab\u0301c(3) + 9x(4) + _(5)\n",
    "(((\n)))\n",
    "not_called = 1\nself.run(x); run(y); rerun(z)\n",
    "",
]


def _ctx(text: str):  # type: ignore[no-untyped-def]
    tree = ast.parse(text)
    return FileChecker("x.py", text, tree, [], code_text(text)).ctx


def test_called_runs_are_the_word_pattern():
    """The text searched backwards gives the words ``\\b(\\w+)\\(`` finds, each as often
    (a call of a call, a space before ``(``, non-ASCII letters and combining marks, ``\\r``)."""
    for text in CALL_TEXTS:
        assert Counter(called_runs(text)) == Counter(CALLED_RE.findall(text)), text
        assert called_names(text) == frozenset(CALLED_RE.findall(text))
    counts = call_counts(CALL_TEXTS[4], ["run", "rerun", "called"])
    assert counts == {"run": 3, "rerun": 1, "called": 0}


def _counted_lines(code: str, at: list[int]) -> list[int]:
    """``word_lines``' lines as they were found: line breaks counted up to each offset."""
    if "\r" in code:
        starts = [0] + [m.end() for m in LINE_END.finditer(code)]
        return sorted({bisect.bisect_right(starts, p) for p in at})
    return sorted({code.count("\n", 0, p) + 1 for p in at})


def test_word_lines_by_line_starts():
    """Offsets to lines by the file's line starts: ``\\r\\n`` and a lone ``\\r`` end a line
    (as the tokenizer counts), a last line without a line break, several names."""
    texts = [
        "class A:\n    pass\n\n\nx = A()\ny = [A(), B]\nB = A",
        "class A:\r\n    pass\r\nx = A()\r\ny = A\r\n",
        "A = 1\rB = A\r\nC = (A,\n     B)\n",
    ]
    for text in texts:
        ctx = _ctx(text)
        for names in (("A",), ("B",), ("A", "B"), ("C",)):
            at = [p for n in names for p in range(len(text))
                  if text.startswith(n, p) and (p == 0 or not text[p - 1].isalnum())
                  and (p + 1 == len(text) or not text[p + 1].isalnum())]
            assert word_lines(ctx, names) == _counted_lines(text, at), (text, names)
    assert word_lines(_ctx(texts[0]), ("A",)) == [1, 5, 6, 7]


def test_dynamic_words_as_the_pattern():
    """A word is found where ``\\b(words)\\b`` finds it: not inside a longer word, before or
    after non-ASCII letters neither."""
    texts = ["xchildren", "children", "a._modules", "a_modules", "named_modules",
             "xnamed_modules()", "modules_", "getattr(self, n)", "é__dict__", "__dict__é",
             "self.parameters()", "params = 1\nnamed_parametersx", ""]
    for text in texts:
        assert _dynamic(text) == (DYNAMIC_RE.search(text) is not None), text


def test_multi_view_assignments_let_go():
    """GT608 still reports the write into a piece (``q[0] = ...`` is a subscript write);
    other assignments are let go without ``_check``."""
    src = textwrap.dedent("""
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                q[..., 0] = 0.0
                return q + k + v
        """)
    assert [(f.code, f.line) for f in check_source(src, "x.py", select=("GT608",))] \
        == [("GT608", 12)]
    ctx = _ctx(src)
    rule = InplaceWriteToMultiOutputView()
    plain = ast.parse("a = b").body[0]
    assert list(rule.visit_Assign(plain, ctx)) == []  # type: ignore[arg-type]
