"""Realistic fixture files carry their expected findings inline: `# GT101` (several allowed,
`# GT101 GT102`) at the end of each line that must be reported, and nothing elsewhere.

A fixture is compared on the codes that appear as markers in ANY fixture, plus every code of
its family (FAMILIES: file-name prefix -> code prefix), so a family's rules must also stay
silent on its look-alikes.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gradtrace.lint import check_source

FIXTURES = Path(__file__).parent / "fixtures"
MARKER_RE = re.compile(r"#.*?\b(GT\d{3}(?:[ ,]+GT\d{3})*)\s*$")
CODE_RE = re.compile(r"GT\d{3}")
FAMILIES = {"leaf_": "GT3", "registration_": "GT4", "grad_mode_": "GT2", "inplace_": "GT6"}


def _markers(text: str) -> set[tuple[int, str]]:
    out = set()
    for i, line in enumerate(text.splitlines(), 1):
        m = MARKER_RE.search(line)
        if m:
            out.update((i, c) for c in CODE_RE.findall(m.group(1)))
    return out


def _files() -> list[Path]:
    return sorted(FIXTURES.glob("*.py"))


ALL_MARKED = {c for p in _files() for _, c in _markers(p.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_fixture_findings_match_markers(path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    text = path.read_text(encoding="utf-8")
    expected = _markers(text)
    prefixes = tuple(v for k, v in FAMILIES.items() if path.name.startswith(k))
    found = {(f.line, f.code) for f in check_source(text, str(path), select=["ALL"])
             if f.code in ALL_MARKED or (prefixes and f.code.startswith(prefixes))}
    assert found == expected, (f"missing: {sorted(expected - found)}; "
                               f"unexpected: {sorted(found - expected)}")
