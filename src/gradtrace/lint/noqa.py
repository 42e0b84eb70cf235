"""``# noqa`` comments: the findings a line's comment turns off."""
from __future__ import annotations

import re
from typing import Iterator

from gradtrace.findings import Finding

NOQA_RE = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]*(?:[,\s]+[A-Z]+[0-9]*)*))?",
                     re.IGNORECASE)


def noqa_filter(findings: list[Finding], lines: list[str]) -> Iterator[Finding]:
    """Drop findings whose line carries ``# noqa`` or ``# noqa: CODE[,PREFIX...]``."""
    cache: dict[int, tuple[str, ...] | None] = {}
    for f in findings:
        if f.line not in cache:
            text = lines[f.line - 1] if 0 < f.line <= len(lines) else ""
            m = NOQA_RE.search(text) if "#" in text else None
            if m is None:
                cache[f.line] = None
            else:
                codes = m.group("codes")
                cache[f.line] = tuple(c.upper() for c in re.split(r"[,\s]+", codes) if c) \
                    if codes else ()
        codes = cache[f.line]
        if codes is None or (codes and not any(f.code.startswith(c) for c in codes)):
            yield f
