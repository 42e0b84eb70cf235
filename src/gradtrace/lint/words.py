"""Where the rules' trigger words occur in a file's text: one scan per shared stem
(NOTE [word search]), and line-range membership over sorted line lists."""
from __future__ import annotations

import bisect
import re
from functools import lru_cache
from itertools import compress, count, repeat
from operator import is_

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


# NOTE [token lines]
# The scans above read the whole code once per needle (~35 needles a file pass the identifier
# prefilter). In ASCII code with plain line ends, one pass over the code's lines instead
# indexes each identifier-character run (``padding``, ``zero_grad``, ``0``) with the lines it
# is on. A word made of identifier characters occurs on a line exactly when one of that
# line's runs holds it (``add`` in ``padding``: the same substring meaning as the scans), so
# its lines are the lines of the runs that hold it, found in the distinct runs joined by
# spaces (the file's identifiers, NOTE [identifier prefilter], which come with the index). A
# word with punctuation (``.backward(``, ``out =``) lies on one line, with its longest run
# inside one of that line's runs: its lines are those of the runs holding that run whose
# text holds the word. Words whose runs are all shorter than three characters (``+=``, ``_(``,
# ``** 0.5``) would hold most lines: they are found in one pass of a regular expression with
# the words as alternatives, longest first (their first characters are rare in code: half the
# cost of a scan for each). A match hides the words that start inside it (``*=`` in ``] *=``)
# or are a prefix of it: those are looked for at each match, so every occurrence is found. In
# all about an eighth cheaper than the scans with the identifiers they need; code with other
# characters or line ends is searched by :func:`word_lines`.
_TOKEN_BYTES = bytes.maketrans(bytes(range(128)), bytes(
    c if chr(c).isalnum() or c in (95, 10) else 32 for c in range(128)))
_RUN = re.compile(r"[A-Za-z0-9_]+")
MIN_RUN = 3


@lru_cache(maxsize=64)
def _token_plan(words: frozenset[str]
                ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], frozenset[str]]:
    """(the words that are one run, (word, its longest run) for the other words with a run of
    :data:`MIN_RUN` characters, the words left to scan) (NOTE [token lines])."""
    whole: list[str] = []
    via: list[tuple[str, str]] = []
    scan: list[str] = []
    for w in sorted(words):
        runs = _RUN.findall(w)
        if runs == [w]:
            whole.append(w)
        else:
            best = max(runs, key=len, default="")
            if len(best) >= MIN_RUN:
                via.append((w, best))
            else:
                scan.append(w)
    return tuple(whole), tuple(via), frozenset(scan)


def token_word_lines(text: str, words: frozenset[str], runs: frozenset[str] = frozenset()
                     ) -> tuple[dict[str, set[int]], str] | None:
    """:func:`word_lines` of ``text`` and its :func:`~gradtrace.lint.code_text.identifiers`
    (in another order), from one index of its runs (NOTE [token lines]); None for text that
    is not ASCII or has another line end than ``\\n``. Each of ``runs`` is looked for as a
    whole run (``for``, not in ``forward``: NOTE [function requires])."""
    if "\r" in text or not text.isascii():
        return None
    whole, via, scan = _token_plan(words)
    index: dict[bytes, list[int]] = {}
    get = index.get
    for no, line in enumerate(text.encode("ascii").translate(_TOKEN_BYTES).split(b"\n"), 1):
        for run in line.split():
            at = get(run)
            if at is None:
                index[run] = [no]
            elif at[-1] != no:
                at.append(no)
    joined = b" ".join(index).decode("ascii")
    needles = _needles(words)
    lines_of = _held_lines(index, words, needles) if len(needles) >= HELD_MIN else \
        _searched_lines(index, joined, needles)
    out: dict[str, set[int]] = {}
    for w in whole:
        got = lines_of.get(w)
        if got:
            out[w] = got
    if via:
        lines = text.split("\n")
        for w, run in via:
            got = {no for no in lines_of.get(run, ()) if w in lines[no - 1]}
            if got:
                out[w] = got
    if scan:
        out.update(_scan_lines(text, scan))
    for w in runs:
        got = index.get(w.encode("ascii"))
        if got:
            out[w] = set(got)
    return out, joined


def _held_lines(index: dict[bytes, list[int]], words: frozenset[str],
                needles: tuple[str, ...]) -> dict[str, set[int]]:
    """Needle -> the lines of the runs of ``index`` holding it, from the needles each run is
    remembered to hold (NOTE [held needles])."""
    held = _held(words)
    if len(held) > HELD_LIMIT:
        held.clear()
    hget = held.get
    lines_of: dict[str, set[int]] = {}
    new: list[bytes] = []
    for run, at in index.items():
        ws = hget(run)
        if ws is None:
            new.append(run)
            continue
        for w in ws:
            got = lines_of.get(w)
            if got is None:
                lines_of[w] = set(at)
            else:
                got.update(at)
    if new:
        _learn(held, new, needles)
        for run in new:
            for w in held[run]:
                got = lines_of.get(w)
                if got is None:
                    lines_of[w] = set(index[run])
                else:
                    got.update(index[run])
    return lines_of


def _searched_lines(index: dict[bytes, list[int]], joined: str, needles: tuple[str, ...]
                    ) -> dict[str, set[int]]:
    """Needle -> the lines of the runs of ``index`` holding it, one search of the joined runs
    per needle (NOTE [token lines]): cheaper than the remembered runs for a few needles."""
    runs = list(index.values())
    starts: list[int] = []
    pos = 0
    for k in index:
        starts.append(pos)
        pos += len(k) + 1
    starts.append(len(joined) + 1)
    lines_of: dict[str, set[int]] = {}
    for w in needles:
        got: set[int] = set()
        p = joined.find(w)
        while p != -1:
            i = bisect.bisect_right(starts, p) - 1
            got.update(runs[i])
            p = joined.find(w, starts[i + 1])
        if got:
            lines_of[w] = got
    return lines_of


# NOTE [line cache]
# Most lines of a project's code are lines it holds elsewhere: on transformers' torch files
# 16% of the code's lines (30% of its characters) are new when the files come in order, the
# rest repeat lines of earlier files or of the same file (``return hidden_states``, the
# "Copied from" functions, lines whose strings and comments were blanked). The words a line
# holds depend on the line alone (no word holds a line end), so each distinct line is searched
# once per process and word set and remembered as the tuple of the words it holds (most: none);
# a file's lines are looked up, and only the lines never seen before are searched, joined by
# line ends, by :func:`token_word_lines` (the same answers: it reads line by line). The table
# is dropped past :data:`LINE_LIMIT` lines.
LINE_LIMIT = 250_000


@lru_cache(maxsize=16)
def _line_table(words: frozenset[str], runs: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """Line -> the words (and whole runs) it holds, for one word set (NOTE [line cache])."""
    return {}


def line_word_lines(text: str, words: frozenset[str], runs: frozenset[str] = frozenset()
                    ) -> dict[str, set[int]] | None:
    """The first half of :func:`token_word_lines` (the same word lines, no identifiers), from
    the lines remembered (NOTE [line cache]); None where that function gives None, or for a
    word with a line end."""
    if "\r" in text or not text.isascii() or not _line_safe(words):
        return None
    table = _line_table(words, runs)
    lines = text.split("\n")
    got = list(map(table.get, lines))  # a tuple of words (most: empty), None: never seen
    out: dict[str, set[int]] = {}
    for no in compress(count(1), got):  # the lines holding a word
        for w in got[no - 1]:
            at = out.get(w)
            if at is None:
                out[w] = {no}
            else:
                at.add(no)
    if None not in got:
        return out
    if len(table) > LINE_LIMIT:
        table.clear()
    miss = list(compress(count(1), map(is_, got, repeat(None))))
    new = [lines[no - 1] for no in miss]
    found, _ = token_word_lines("\n".join(new), words, runs) or ({}, "")
    held: list[tuple[str, ...]] = [()] * len(miss)
    for w, at_new in found.items():
        for k in at_new:
            held[k - 1] += (w,)
            no = miss[k - 1]
            at = out.get(w)
            if at is None:
                out[w] = {no}
            else:
                at.add(no)
    table.update(zip(new, held))
    return out


@lru_cache(maxsize=16)
def _line_safe(words: frozenset[str]) -> bool:
    """Whether no word holds a line end (each is then found line by line)."""
    return not any("\n" in w for w in words)


# NOTE [held needles]
# Which needles (the identifier words, and the longest runs of the words with punctuation)
# a run holds depends on the run alone, and the runs of a project's files are mostly the same
# names (``self``, ``forward``, ``hidden_states``): each distinct run is searched once per
# process and word set, remembered as the needles it holds, and a file's lines of a needle are
# the lines of its runs that hold it. Only the runs never seen before are searched, joined by
# spaces as the file's identifiers were (a needle has no space, so a hit lies in one run); on
# transformers about a fifth of the word search. The table is dropped past
# :data:`HELD_LIMIT` runs.
HELD_LIMIT = 100_000
HELD_MIN = 64  # fewer needles (a narrow --select): searched in the joined runs as before


@lru_cache(maxsize=16)
def _held(words: frozenset[str]) -> dict[bytes, tuple[str, ...]]:
    """Run -> the needles it holds, for one word set (NOTE [held needles])."""
    return {}


@lru_cache(maxsize=16)
def _needles(words: frozenset[str]) -> tuple[str, ...]:
    whole, via, _ = _token_plan(words)
    return tuple(sorted({*whole, *(run for _, run in via)}))


def _learn(held: dict[bytes, tuple[str, ...]], new: list[bytes], needles: tuple[str, ...]
           ) -> None:
    """Record the needles each of the ``new`` runs holds (NOTE [held needles])."""
    found: list[list[str]] = [[] for _ in new]
    joined = b" ".join(new).decode("ascii")
    starts: list[int] = []
    pos = 0
    for k in new:
        starts.append(pos)
        pos += len(k) + 1
    starts.append(len(joined) + 1)
    for w in needles:
        p = joined.find(w)
        while p != -1:
            i = bisect.bisect_right(starts, p) - 1
            found[i].append(w)
            p = joined.find(w, starts[i + 1])
    for run, ws in zip(new, found):
        held[run] = tuple(ws)


@lru_cache(maxsize=16)
def _alternation(words: frozenset[str]
                 ) -> tuple[re.Pattern[str] | None, dict[str, tuple[tuple[int, str], ...]],
                            tuple[str, ...]]:
    """(the pattern finding the ``words`` that do not start with white space, one branch per
    first character, longest first; for each of them the (offset, word) that may occur hidden
    by a match of it; the words that start with white space) (NOTE [scan branches])."""
    spaced = tuple(sorted(w for w in words if w[:1].isspace()))
    ordered = sorted(words.difference(spaced), key=lambda w: (-len(w), w))
    hidden: dict[str, tuple[tuple[int, str], ...]] = {}
    for w in ordered:  # at the match: the shorter words it starts with (a longer one would
        # have matched); inside it: every word that agrees with the rest of the match
        hidden[w] = tuple([(0, o) for o in ordered if o != w and w.startswith(o)] + [
            (off, o) for off in range(1, len(w)) for o in ordered
            if o.startswith(w[off:]) or w[off:].startswith(o)])
    branches: dict[str, list[str]] = {}
    for w in ordered:
        branches.setdefault(w[0], []).append(re.escape(w[1:]))
    pattern = "|".join(f"{re.escape(c)}(?:{'|'.join(rest)})" for c, rest in branches.items())
    return (re.compile(pattern) if ordered else None), hidden, spaced


# NOTE [scan branches]
# Python's ``re`` tries the alternatives of a pattern one after another at every place whose
# character may start one of them. Words such as `` - `` start with a space, which is on
# every line many times (indentation), and 21 alternatives tried at each place cost as much
# as the rest of the word search. So the pattern holds one branch per first character (the
# words' rests after it, longest first: the same word matches at the same place), and the
# words that start with white space are found by ``str.find`` on their own: 3x cheaper on
# transformers, the same occurrences (each word's are all found either way).
def _scan_lines(text: str, words: frozenset[str]) -> dict[str, set[int]]:
    """:func:`word_lines` of ``text`` (line ends ``\\n`` only) for words without a long run,
    in one pass (NOTE [token lines]) and one ``find`` loop per word starting with white space
    (NOTE [scan branches])."""
    pattern, hidden, spaced = _alternation(words)
    hits: list[tuple[int, str]] = []
    for m in pattern.finditer(text) if pattern is not None else ():
        w, p = m.group(), m.start()
        hits.append((p, w))
        for off, o in hidden[w]:
            if text.startswith(o, p + off):
                hits.append((p + off, o))
    for w in spaced:
        p = text.find(w)
        while p != -1:
            hits.append((p, w))
            p = text.find(w, p + 1)
    hits.sort()
    out: dict[str, set[int]] = {}
    line, prev = 1, 0
    for pos, w in hits:
        line += text.count("\n", prev, pos)
        prev = pos
        out.setdefault(w, set()).add(line)
    return out


def holds(lines: list[int], first: int, last: int) -> bool:
    """Whether the sorted ``lines`` hold a line from ``first`` to ``last``."""
    k = bisect.bisect_left(lines, first)
    return k < len(lines) and lines[k] <= last
