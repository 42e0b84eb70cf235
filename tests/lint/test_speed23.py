"""Speed cuts of session 23 that must give the answers of the code they replace."""
from __future__ import annotations

import ast

from gradtrace.lint.code_text import code_text
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports
from gradtrace.lint.nodes import holds_line
from gradtrace.lint.rules.leaf._tensors import mention_lines, node_mentions

SOURCE = '''import torch
import torch.nn.functional as F

def value_loss(v, r):
    return F.mse_loss(v, r)  # pow in a comment is no code

def scale(x):
    s = "pow"
    return x * 2

class Head(torch.nn.Module):
    def forward(self, x):
        def inner(y):
            return y.pow(2)
        return inner(x) + x.pow(3) + x.pow(4)
'''


def _ctx(text: str) -> Context:
    tree = ast.parse(text)
    return Context("t.py", text, tree, Imports(), code_text(text))


def test_mention_lines_answer_as_node_mentions():
    """A statement's lines hold a line of ``mention_lines`` exactly when ``node_mentions``
    finds a word in it: ``\\n``, ``\\r\\n`` and lone ``\\r`` line ends, a word twice on a line,
    comments and strings (blanked in the code), nested functions."""
    words = ("mse_loss", "pow", "log_prob")
    for text in (SOURCE, SOURCE.replace("\n", "\r\n"), SOURCE.replace("\n", "\r"),
                 SOURCE.rstrip("\n")):
        ctx = _ctx(text)
        lines = mention_lines(ctx, *words)
        checked = 0
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.stmt):
                checked += 1
                assert holds_line(lines, node.lineno, node.end_lineno or node.lineno) \
                    == node_mentions(ctx, node, *words), (repr(text[:20]), node.lineno)
        assert checked == 12
        assert lines == [5, 14, 15]
