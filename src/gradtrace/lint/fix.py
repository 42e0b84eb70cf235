"""Apply fixes as text edits; refuse any result that does not parse."""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from gradtrace.findings import Edit, Finding

if TYPE_CHECKING:
    from gradtrace.lint.config import Settings


@dataclass(frozen=True)
class FixOutcome:
    """The new text of one file, the findings fixed, and why it was refused (if it was)."""

    path: str
    old: str
    new: str
    fixed: tuple[Finding, ...]
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.new != self.old

    def diff(self) -> str:
        """A unified diff of the change."""
        return "".join(difflib.unified_diff(
            self.old.splitlines(keepends=True), self.new.splitlines(keepends=True),
            fromfile=f"a/{self.path}", tofile=f"b/{self.path}"))


def fixable(f: Finding, unsafe: bool) -> bool:
    """Whether ``f`` carries a fix allowed at this safety level."""
    return f.fix is not None and bool(f.fix.edits) and (f.fix.safety == "safe" or unsafe)


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def apply_edits(text: str, findings: Iterable[Finding], unsafe: bool = False
                ) -> tuple[str, tuple[Finding, ...]]:
    """Apply non-overlapping fixes (a fix whose edits overlap an earlier one is skipped)."""
    starts = _offsets(text)

    def pos(line: int, col: int) -> int:
        return starts[min(line - 1, len(starts) - 1)] + col

    chosen: list[tuple[int, int, Edit]] = []
    applied: list[Finding] = []
    taken: list[tuple[int, int]] = []
    for f in sorted(findings, key=Finding.sort_key):
        if not fixable(f, unsafe):
            continue
        spans = [(pos(e.line, e.column), pos(e.end_line, e.end_column), e)
                 for e in f.fix.edits]  # type: ignore[union-attr]
        if any(a < tb and ta < b or (a == b == ta == tb) for a, b, _ in spans
               for ta, tb in taken):
            continue
        taken.extend((a, b) for a, b, _ in spans)
        chosen.extend(spans)
        applied.append(f)
    out = text
    for a, b, e in sorted(chosen, key=lambda t: (t[0], t[1]), reverse=True):
        out = out[:a] + e.content + out[b:]
    return out, tuple(applied)


def fix_text(path: str, text: str, findings: Iterable[Finding], unsafe: bool = False
             ) -> FixOutcome:
    """Fix one file's text; the result must parse, else nothing is changed."""
    new, applied = apply_edits(text, findings, unsafe)
    if new == text:
        return FixOutcome(path, text, text, ())
    try:
        ast.parse(new, filename=path)
    except SyntaxError as exc:
        return FixOutcome(path, text, text, (),
                          f"fixes not applied: the result would not parse ({exc.msg}, "
                          f"line {exc.lineno})")
    return FixOutcome(path, text, new, applied)


MAX_FIX_ROUNDS = 10


def fix_loop(path: str, text: str, findings: list[Finding], settings: Settings,
             unsafe: bool) -> tuple[FixOutcome, list[Finding]]:
    """Fix, re-check and fix again until nothing changes; returns the outcome and what remains."""
    from gradtrace.lint import check_text

    current, fixed, remaining = text, [], findings
    for _ in range(MAX_FIX_ROUNDS):
        outcome = fix_text(path, current, remaining, unsafe)
        if outcome.error is not None:
            return FixOutcome(path, text, current, tuple(fixed), outcome.error), remaining
        if not outcome.changed:
            break
        fixed.extend(outcome.fixed)
        current = outcome.new
        remaining = check_text(current, path, settings).findings
    return FixOutcome(path, text, current, tuple(fixed)), remaining
