"""One line of source for a message: whitespace runs (line breaks too) made one space, cut to a limit."""
from __future__ import annotations


def excerpt(text: str, limit: int = 60) -> str:
    """``text`` on one line, at most ``limit`` characters (the cut ends with ``...``)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
