"""Cheap text tests a rule runs before it builds a function's data flow.

# NOTE [word gates]
A call ``opt.zero_grad()`` or an attribute ``.step`` is written on the lines it is on, so a
function whose lines do not hold the word cannot hold the call, and a rule that needs the
call need not build the function's :class:`~gradtrace.lint.flow.Scope` (a quarter of the
checker's time went into scopes no rule looked at). The words are looked up in the code
(comments and strings out: NOTE [code text]) with one scan per file, and as substrings: a
test that may say yes too often, never no. When the code is not ASCII, a name may be spelled
in characters Python normalises: the test then always says yes.
"""
from __future__ import annotations

import ast

from gradtrace.lint.analysis.calls import ascii_code, span
from gradtrace.lint.context import Context
from gradtrace.lint.words import holds, word_lines


def says_all(ctx: Context, node: ast.AST, words: tuple[str, ...]) -> bool:
    """Whether the code on ``node``'s lines (decorators included; the module: the whole file)
    holds each of ``words`` (NOTE [word gates])."""
    if not ascii_code(ctx):
        return True
    at = ctx.memo("gate-word-lines:" + ",".join(words), ctx.tree, lambda: {
        w: sorted(ls) for w, ls in word_lines(ctx.code, frozenset(words)).items()})
    if isinstance(node, ast.Module):
        return all(w in at for w in words)
    first, last = span(node)
    return all(holds(at.get(w, []), first, last) for w in words)


def says_any(ctx: Context, node: ast.AST, words: tuple[str, ...]) -> bool:
    """Whether the code on ``node``'s lines (decorators included; the module: the whole file)
    holds one of ``words`` (NOTE [word gates])."""
    if not ascii_code(ctx):
        return True
    at = ctx.memo("gate-word-lines:" + ",".join(words), ctx.tree, lambda: {
        w: sorted(ls) for w, ls in word_lines(ctx.code, frozenset(words)).items()})
    if isinstance(node, ast.Module):
        return any(w in at for w in words)
    first, last = span(node)
    return any(holds(at.get(w, []), first, last) for w in words)


def file_says(ctx: Context, word: str) -> bool:
    """Whether the file's code holds ``word`` (NOTE [word gates]; yes when not ASCII)."""
    return not ascii_code(ctx) or ctx.mentions(word)


def file_says_word(ctx: Context, *words: str) -> bool:
    """Whether the file's code holds one of ``words`` as a whole word, an identifier of its
    own (``grad`` in ``p.grad``, not in ``no_grad``) (NOTE [word gates]; yes when not ASCII).
    Found with ``str.find`` and a look at each hit's neighbours, once per file and word set
    (a ``\\b...\\b`` pattern, tried at every place of the code, cost more than it saved)."""
    if not ascii_code(ctx):
        return True
    return ctx.memo("gate-whole-word:" + ",".join(words), ctx.tree,
                    lambda: any(_whole(ctx, w) for w in words if ctx.mentions(w)))


def _whole(ctx: Context, word: str) -> bool:
    code, n = ctx.code, len(word)
    pos = code.find(word)
    while pos != -1:
        end = pos + n
        if (pos == 0 or not (code[pos - 1].isalnum() or code[pos - 1] == "_")) and \
                (end == len(code) or not (code[end].isalnum() or code[end] == "_")):
            return True
        pos = code.find(word, pos + 1)
    return False
