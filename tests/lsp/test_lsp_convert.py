"""Positions and the fix-all edit of the language server, against a reference applier."""
from __future__ import annotations

import random
import re

import pytest

pytest.importorskip("lsprotocol")

from gradtrace.lsp.convert import Positions, whole_text_edit  # noqa: E402


def apply(text: str, edit) -> str:
    """Apply an LSP edit given in code points; lines end at \\r\\n, \\r or \\n (as in LSP)."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def offset(p) -> int:
        return starts[p.line] + p.character if p.line < len(starts) else len(text)

    return text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]


def test_fix_all_edit_turns_old_into_new_for_any_line_ends():
    rng = random.Random(7)
    alphabet = ["a", "b", "\n", "\r\n", "\r", "é", "\x0c"]
    for _ in range(3000):
        old = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        new = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert apply(old, whole_text_edit(old, new, "utf-32")) == new, (old, new)


def test_columns_in_each_encoding():
    text = 'x = 1\ns = "é😀"; loss\n'
    for encoding, column in (("utf-16", 11), ("utf-8", 14), ("utf-32", 10)):
        p = Positions(text, encoding).position(2, 10)
        assert (p.line, p.character) == (1, column)
    pos = Positions("a\x0cb = 1\n", "utf-16")      # a form feed does not end a line
    assert pos.position(1, None).character == 7 and len(pos.lines) == 1
