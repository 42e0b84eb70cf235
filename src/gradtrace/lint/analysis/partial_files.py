"""Another project file that does not parse, read for the calls it can hold.

# NOTE [unparsable reader]
The reverse index (NOTE [reverse index]) answers "unknown" when a file holding the searched
words does not parse: its calls cannot be read, so none can be excluded. Most such files are
notebooks exported to Python with one broken cell (``plot(x, labels[])``) among many
statements. Such a file is read block by block here: a top-level block (a statement starting
at column 0, with its ``else``/``except`` arms) that does not parse is blanked, line numbers
kept, and the rest is parsed again; when no blanked block holds one of the searched words,
the remaining tree holds every call the file spells with them, so the search goes on with it.
A blanked block holding a word keeps the answer unknown (its calls may be there), and so does
a file with more broken blocks than :data:`MAX_BLANKED`. The partial tree serves this search
only: the project index keeps the file as unreadable for every other question.
"""
from __future__ import annotations

import ast
import hashlib
import os

from gradtrace.lint.analysis.owners import READS
from gradtrace.lint.analysis.project_files import MAX_BYTES, _context, _decoded, _Foreign

MAX_BLANKED = 8
_ARMS = ("else", "elif", "except", "finally", ")", "]", "}", "#")
_PARTIAL: dict[str, tuple[tuple[int, int], _Foreign | None, tuple[str, ...]]] = {}


def partial_reader(path: str, words: tuple[bytes, ...]) -> _Foreign | None:
    """The parsable part of the file at ``path`` when no block that does not parse holds one
    of ``words`` (NOTE [unparsable reader]); None otherwise."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    got = _PARTIAL.get(path)
    if got is None or got[0] != stamp:
        if st.st_size > MAX_BYTES:
            return None
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        got = _PARTIAL[path] = (stamp, *_blanked(path, data))
        if len(_PARTIAL) > 200:
            _PARTIAL.clear()
            _PARTIAL[path] = got
    f, cut = got[1], got[2]
    if f is None or any(w.decode("utf-8", "replace") in c for c in cut for w in words):
        return None
    READS[0][path] = f.digest
    return f


def _blanked(path: str, data: bytes) -> tuple[_Foreign | None, tuple[str, ...]]:
    text = _decoded(data)
    if text is None:
        return None, ()
    lines = text.split("\n")
    starts = [i for i, s in enumerate(lines) if s[:1] and not s[:1].isspace()
              and not s.startswith(_ARMS)]
    cut: list[str] = []
    for _ in range(MAX_BLANKED + 1):
        try:
            tree = ast.parse("\n".join(lines), filename=path)
        except SyntaxError as e:
            if len(cut) == MAX_BLANKED or not e.lineno:
                return None, ()
            i = e.lineno - 1
            lo = max((s for s in starts if s <= i), default=0)
            hi = min((s for s in starts if s > i), default=len(lines))
            cut.append("\n".join(lines[lo:hi]))
            lines[lo:hi] = [""] * (hi - lo)
            continue
        except (ValueError, RecursionError, MemoryError):
            return None, ()
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        return _Foreign(_context(path, "\n".join(lines), tree), digest, 1), tuple(cut)
    return None, ()
