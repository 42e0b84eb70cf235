"""Which words a text calls: each whole word followed by ``(``, found in one scan of the text.

# NOTE [called words]
A rule asking whether a function's text calls one of the file's functions (a wrapper that
puts a model in eval mode, a loss helper called twice) once searched the regex alternation of
every name, or counted each name with ``str.count``: a scan of the text per name, quadratic
in a script of many functions. A name that is a whole word (``\\w+``: every identifier
but a few holding combining marks) occurs followed by ``(`` exactly where the text has a
run of word characters ending in that name, followed by ``(``: the runs are found in one
scan and the names looked up in a set (a suffix of each run, for ``str.count``'s
substrings). Names that are not whole words keep the old search.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Iterable

CALLED_RE = re.compile(r"\b(\w+)\(")  # a whole word followed by `(` (the meaning)
REVERSED_RE = re.compile(r"\((\w+)")  # the same, searched in the text reversed
WORD_RE = re.compile(r"\w+")


def called_runs(text: str) -> list[str]:
    """The words of ``CALLED_RE.findall(text)``, in another order: the text is searched
    backwards, for ``(`` then the word run before it. ``CALLED_RE`` opens with ``\\b``: no
    first character to skip to, so ``re`` tries it at every character (8x slower)."""
    return [r[::-1] for r in REVERSED_RE.findall(text[::-1])]


def called_names(text: str) -> frozenset[str]:
    """The words ``text`` calls: each whole word (``\\w+``) followed by ``(``."""
    return frozenset(called_runs(text))


def call_test(names: Iterable[str]) -> Callable[[str], bool] | None:
    """A test of a text for a call of one of ``names``, the answer of
    ``re.search(r"\\b(?:NAME|...)\\(", text)``; None when there is no name.

    The text is scanned once for the whole words followed by ``(``, looked up in a set
    (NOTE [called words]); names that are not whole words keep the alternation."""
    names = frozenset(names)
    if not names:
        return None
    if all(WORD_RE.fullmatch(n) for n in names):
        return lambda text: not names.isdisjoint(called_runs(text))
    pattern = re.compile(r"\b(?:%s)\(" % "|".join(map(re.escape, sorted(names))))
    return lambda text: pattern.search(text) is not None


def call_counts(text: str, names: Iterable[str]) -> dict[str, int]:
    """``{name: text.count(name + "(")}`` for every name, in one scan of the text for the
    word runs followed by ``(`` (NOTE [called words]): ``name(`` occurs where such a run ends
    in ``name``."""
    names = set(names)
    out = {n: 0 if WORD_RE.fullmatch(n) else text.count(n + "(") for n in names}
    wanted = {n for n in names if WORD_RE.fullmatch(n)}
    if wanted:
        longest = max(map(len, wanted))
        for run, times in Counter(called_runs(text)).items():
            for i in range(max(0, len(run) - longest), len(run)):
                if run[i:] in wanted:
                    out[run[i:]] += times
    return out
