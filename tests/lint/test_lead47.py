"""Lead, session 47: the one reader of a freeze statement's flag write."""
from __future__ import annotations

import ast
import textwrap

from gradtrace.lint.rules.registration._grad_flags import flag_statement


def _first(src: str) -> ast.stmt:
    return ast.parse(textwrap.dedent(src)).body[0]


def test_flag_statement_prefers_the_loop_body_write():
    loop = _first("""
        for p in m.parameters():
            with ctx():
                p.requires_grad = True
            p.requires_grad = False
    """)
    assert flag_statement(loop).lineno == 5


def test_flag_statement_finds_a_nested_write_and_a_method_call():
    loop = _first("""
        for p in m.parameters():
            with ctx():
                p.requires_grad_(False)
    """)
    assert flag_statement(loop).lineno == 4


def test_flag_statement_keeps_a_statement_that_is_no_loop_or_has_no_write():
    call = _first("m.requires_grad_(False)")
    assert flag_statement(call) is call
    loop = _first("""
        for p in m.parameters():
            print(p)
    """)
    assert flag_statement(loop) is loop
