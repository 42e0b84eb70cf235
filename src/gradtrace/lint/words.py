"""Where the rules' trigger words occur in a file's text: one scan per shared stem
(NOTE [word search]), and line-range membership over sorted line lists."""
from __future__ import annotations

import bisect
import re
from functools import lru_cache

from gradtrace.lint.code_text import LINE_END, may_hold

_STEM_EDGES = re.compile(r"^\W+|\W+$")  # punctuation around a trigger word: `.backward(`
MIN_STEM = 3  # shorter stems occur everywhere (NOTE [word search])


@lru_cache(maxsize=256)
def search_plan(words: frozenset[str]) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """(needle, ((word, offset of the needle in the word), ...)) groups for :func:`word_lines`.

    # NOTE [word search]
    Looking for each of the ~60 trigger words with ``str.find`` scans the whole text ~60 times
    (about a tenth of the run; one regex alternation is slower still). Words share stems:
    ``.backward(`` and ``manual_backward(`` hold ``backward``, ``.weight -=`` holds ``weight``.
    Each group of words is found through one needle, their shared stem (a stem holding no
    other word's stem), and a ``startswith`` check at each place the needle occurs; a group of
    one word is its own needle. That halves the number of scans (58 words, 32 needles). A stem
    of one or two characters is no stem: ``_(`` (an in-place call) would make ``_`` the needle
    of every word holding an underscore, checked at each of the thousands of underscores of a
    file (a fifth of the checker's time); such a word is its own needle. A member whose
    identifier runs the file lacks is not checked at all (NOTE [identifier prefilter]).
    """
    stems = {w: _STEM_EDGES.sub("", w) for w in words}
    stems = {w: st if len(st) >= MIN_STEM else w for w, st in stems.items()}
    minimal = sorted({st for st in stems.values()
                      if not any(o != st and o in st for o in stems.values())})
    groups: dict[str, list[str]] = {}
    for w in sorted(words):
        root = next(r for r in minimal if r in stems[w])
        groups.setdefault(root, []).append(w)
    plan = []
    for root, members in groups.items():
        needle = members[0] if len(members) == 1 else root
        plan.append((needle, tuple((w, w.find(needle)) for w in members)))
    return tuple(plan)


def word_lines(text: str, words: frozenset[str],
               idents: str | None = None) -> dict[str, set[int]]:
    """The 1-based lines on which each of ``words`` occurs (words that do not occur: absent;
    one scan per needle, NOTE [word search]). ``idents``: the text's
    :func:`~gradtrace.lint.code_text.identifiers`, to skip the scans of absent needles."""
    hits: list[tuple[int, str]] = []
    for needle, members in search_plan(words):
        if idents is not None and not may_hold(idents, needle):
            continue
        pos = text.find(needle)
        if pos == -1:
            continue
        at = []
        while pos != -1:
            at.append(pos)
            pos = text.find(needle, pos + 1)
        for w, off in members:
            if w == needle:
                hits.extend((p, w) for p in at)
            elif idents is None or may_hold(idents, w):
                hits.extend((p - off, w) for p in at if p >= off and text.startswith(w, p - off))
    hits.sort()
    word_lines: dict[str, set[int]] = {}
    if "\r" in text:  # lines may also end in a lone \r: slow path
        starts = [0] + [m.end() for m in LINE_END.finditer(text)]
        for pos, w in hits:
            word_lines.setdefault(w, set()).add(bisect.bisect_right(starts, pos))
    else:
        line, prev = 1, 0
        for pos, w in hits:
            line += text.count("\n", prev, pos)
            prev = pos
            word_lines.setdefault(w, set()).add(line)
    return word_lines


def holds(lines: list[int], first: int, last: int) -> bool:
    """Whether the sorted ``lines`` hold a line from ``first`` to ``last``."""
    k = bisect.bisect_left(lines, first)
    return k < len(lines) and lines[k] <= last
