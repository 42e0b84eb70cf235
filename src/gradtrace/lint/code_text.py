"""The code of a file with its comments and the contents of its strings taken out, lines kept.

# NOTE [code text]
Trigger words, prefilters and every text search of a rule must see code only: the word
``zero_grad`` in a comment (``loss.backward()  # forgot zero_grad``) or a docstring must never
turn a rule on or off, nor decide a finding. :func:`code_text` gives the file's text with each
comment reduced to ``#`` and each string literal to ``""`` followed by the line ends it spanned,
so every line of code stays on its line number (columns after a literal move). The expressions
inside an f-string's braces are code and stay (their own strings are emptied in turn).

One regular expression splits the text into code and literals, as the tokenizer would in a
file that parses (the checker only looks at files ``ast.parse`` accepted): a ``#`` outside a
string starts a comment, a quote outside a comment starts a string. It costs about 5% of
``ast.parse``, where the ``tokenize`` module costs several times it; what it saves (the
trigger search scans less text and finds fewer lines) pays for most of it.
"""
from __future__ import annotations

import ast
import itertools
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

_LITERAL = re.compile(
    r"(#[^\r\n]*"
    r"|'''[^'\\]*(?:(?:\\(?:\r\n|[\s\S])|'(?!''))[^'\\]*)*'''"
    r'|"""[^"\\]*(?:(?:\\(?:\r\n|[\s\S])|"(?!""))[^"\\]*)*"""'
    r"|'[^'\\\r\n]*(?:\\(?:\r\n|[\s\S])[^'\\\r\n]*)*'"
    r'|"[^"\\\r\n]*(?:\\(?:\r\n|[\s\S])[^"\\\r\n]*)*")')
_LINE_END = re.compile(r"\r\n|\r|\n")
LINE_END = re.compile(r"(\r\n|\r|\n)")  # a line end, as the tokenizer counts them
_PREFIX = frozenset("rRbBuUfF")


def _line_ends(s: str) -> str:
    """The line ends in ``s``, in order (what keeps the lines after a literal in place)."""
    if "\r" not in s:
        return "\n" * s.count("\n")
    return "".join(_LINE_END.findall(s))


def _is_fstring(before: str) -> bool:
    """Whether the code ``before`` a string literal ends with a prefix holding ``f``."""
    k = len(before)
    while k > 0 and len(before) - k < 2 and before[k - 1] in _PREFIX:
        k -= 1
    prefix = before[k:]
    if "f" not in prefix and "F" not in prefix:
        return False
    return k == 0 or not (before[k - 1].isalnum() or before[k - 1] == "_")


def _fstring(s: str) -> str:
    """An f-string literal with its literal parts taken out and its ``{...}`` code kept."""
    q = 3 if s.startswith(('"""', "'''")) else 1
    body = s[q:-q]
    out = ['""']
    depth, start, i, n = 0, 0, 0, len(body)
    while i < n:
        c = body[i]
        if depth == 0:
            if c == "{":
                if body.startswith("{{", i):
                    i += 2
                    continue
                depth, start = 1, i
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                out.append(" " + code_text(body[start + 1:i]) + " ")
        i += 1
    if depth:  # unbalanced (a newer Python's nested quotes): keep what is left as code
        out.append(" " + code_text(body[start + 1:]))
    kept = "".join(out)
    ends = _line_ends(body)
    if ends:  # keep the line count: drop the line ends kept inside braces, add all of them
        kept = kept.replace("\r", " ").replace("\n", " ") + ends
    return kept


def code_text(text: str) -> str:
    """``text`` with comments reduced to ``#`` and strings to ``""`` (line ends kept)."""
    parts = _LITERAL.split(text)
    if len(parts) == 1:
        return text
    for i in range(1, len(parts), 2):
        s = parts[i]
        if s[0] == "#":
            parts[i] = "#"
        elif "{" in s and parts[i - 1][-1:] in _PREFIX and _is_fstring(parts[i - 1]):
            parts[i] = _fstring(s)
        elif "\n" in s or "\r" in s:
            parts[i] = '""' + _line_ends(s)
        else:
            parts[i] = '""'
    return "".join(parts)


# NOTE [identifier prefilter]
# A file's code is ~15% distinct identifiers: `model`, `loss`, `self` recur on every line. A
# trigger word or a searched spelling (`.zero_grad(`, `** 0.5`) can occur in the code only if
# each run of identifier characters in it (`zero_grad`; `0`, `5`) lies inside one identifier
# of the code, so a search of the distinct identifiers, joined, tells most absent words apart
# at a sixth of the cost of a scan of the code (the trigger search scans for ~50 words, most
# absent). Only words that pass are looked for in the code: the same answers, less scanning.
_IDENT_BYTES = bytes.maketrans(bytes(range(128)), bytes(
    c if chr(c).isalnum() or c == 95 else 32 for c in range(128)))
_RUNS = re.compile(r"[A-Za-z0-9_]+")


def identifiers(code: str) -> str | None:
    """The distinct identifier-character runs of an ASCII ``code``, joined by spaces
    (None for other code: no prefilter, NOTE [identifier prefilter])."""
    if not code.isascii():
        return None
    return b" ".join(set(code.encode("ascii").translate(_IDENT_BYTES).split())).decode("ascii")


def may_hold(idents: str | None, needle: str) -> bool:
    """False only when ``needle`` cannot occur in the code ``idents`` was made from."""
    if idents is None:
        return True
    for run in _runs(needle):  # (a loop: all() of a generator costs twice as much here)
        if run not in idents:
            return False
    return True


@lru_cache(maxsize=4096)
def _runs(needle: str) -> tuple[str, ...]:
    return tuple(_RUNS.findall(needle))


# NOTE [commented-out call]
# A comment never decides a finding, but it may say *where* a finding belongs: when the rule
# has found, from the code alone, that a call is missing (GT501: nothing clears the gradients)
# and the same block holds that very call commented out (`# optimizer.zero_grad()`), the
# commented line is the one the user must change. Only a whole-line comment whose text parses
# as a call of `attr` counts; prose that mentions the word does not.
_COMMENTED_CALL = re.compile(r"^\s*#+\s*([A-Za-z_][\w.]*)\.(\w+)\(.*\)\s*(?:#.*)?$")


def commented_out_call(lines: list[str], first: int, last: int, attr: str) -> tuple[int, str] | None:
    """The first line in ``first..last`` (1-based, inclusive) of ``lines`` that is a comment
    holding only a call ``receiver.attr(...)``: ``(line, receiver)``, or None."""
    for no in range(max(first, 1), min(last, len(lines)) + 1):
        text = lines[no - 1]
        if "#" not in text or attr not in text:
            continue
        m = _COMMENTED_CALL.match(text)
        if m is None or m.group(2) != attr:
            continue
        try:
            ast.parse(text.strip().lstrip("#").strip().split("  #")[0])
        except SyntaxError:
            continue
        return no, m.group(1)
    return None


def block_end(lines: list[str], block: ast.AST) -> int:
    """The last line of ``block`` with the comment lines indented under it that follow its
    last statement (``ast`` ends a block at its last statement)."""
    last = block.end_lineno or block.lineno  # type: ignore[attr-defined]
    col = block.col_offset  # type: ignore[attr-defined]
    while last < len(lines):
        text = lines[last]
        stripped = text.lstrip()
        if stripped and (not stripped.startswith("#") or len(text) - len(stripped) <= col):
            break
        last += 1
    return last


def line_starts(ctx: Context) -> list[int]:
    """Offset of the start of each line (index 1 = line 1), lines ending where the tokenizer
    ends them (str.splitlines would also split at form feeds and the like); once per file."""
    def make() -> list[int]:
        text = ctx.code
        if "\r" in text:
            ends = [m.end() for m in LINE_END.finditer(text)]
        else:  # the file's lines, split once (`ctx.code_lines`: `text.split("\n")` without
            # the empty piece after a final break; without that break, the last line has none)
            lines = ctx.code_lines if text.endswith("\n") else ctx.code_lines[:-1]
            ends = list(itertools.accumulate(map((1).__add__, map(len, lines))))
        if text and text[-1] not in "\r\n":
            ends.append(len(text))  # the end of a last line without a line break
        return [0, 0, *ends]
    return ctx.memo("gt3-line-starts", ctx.tree, make)


def occurrences(text: str, word: str) -> Iterator[int]:
    """Every offset where ``word`` starts in ``text``, overlapping ones too, in order (a
    ``str.find`` scan: a pattern of alternatives is tried at each of its first characters)."""
    p = text.find(word)
    while p != -1:
        yield p
        p = text.find(word, p + 1)
