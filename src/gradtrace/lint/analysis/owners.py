"""Which file a definition of the project index belongs to, and which other files the facts
of the checked file read (NOTE [project index]): kept apart from the index so that the
context (:meth:`~gradtrace.lint.context.Context.scope`) can ask without importing it."""
from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

OWNERS: dict[int, tuple[ast.AST, Context]] = {}  # id(def node) -> (node, its context)
READS: list[dict[str, str]] = [{}]  # per checked file: path -> digest of what facts read


def begin_reads() -> None:
    """A new checked file: forget which other files the last one's facts read."""
    READS[0] = {}


def reads() -> dict[str, str]:
    """The other files (path -> blake2b of their bytes) the facts of this file read."""
    return dict(READS[0])


def home(ctx: Context, node: ast.AST | None) -> Context:
    """The context ``node`` belongs to: ``ctx``, or another file's for a node of it."""
    if node is None or not OWNERS:
        return ctx
    got = OWNERS.get(id(node))
    if got is None or got[0] is not node:
        return ctx
    return got[1]


def foreign_path(ctx: Context, node: ast.AST) -> str | None:
    """The path of the other file ``node`` belongs to (None: ``ctx``'s own)."""
    h = home(ctx, node)
    return None if h is ctx else h.path


def shown_path(path: str, beside: str) -> str:
    """``path`` spelled as the checked file ``beside`` is: relative to the current folder
    when that one is relative (a finding's other locations read like its own)."""
    if os.path.isabs(beside):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel

