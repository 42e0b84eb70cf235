"""Design notes (``# NOTE [name]``, torch style): defined once, referenced by name on one line."""
from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gradtrace"
# a definition starts its line (or a docstring): `# NOTE [name]`, maybe `: text` after it
DEF = re.compile(r'^[ \t]*(?:""")?# NOTE \[([^\]\n]+)\](?::[^\n]*)?[ \t]*$', re.M)
REF = re.compile(r"NOTE \[([^\]\n]+)\]")
WRAPPED = re.compile(r"NOTE\s*\n|NOTE \[[^\]\n]*\n")


def _texts() -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8") for p in SRC.rglob("*.py")}


def test_every_note_is_defined_once_and_referenced_by_name():
    texts = _texts()
    defs: dict[str, list[str]] = {}
    for path, text in texts.items():
        for m in DEF.finditer(text):
            defs.setdefault(m.group(1), []).append(path.name)
    assert defs, "no NOTE found: the pattern is broken"
    assert {n: w for n, w in defs.items() if len(w) > 1} == {}
    refs = {m.group(1) for text in texts.values() for m in REF.finditer(text)
            if not DEF.match(text, text.rfind("\n", 0, m.start()) + 1)}
    assert sorted(set(defs) - refs) == []
    assert sorted(refs - set(defs)) == []


def test_no_note_reference_wraps_across_lines():
    wrapped = [f"{p.name}:{t.count(chr(10), 0, m.start()) + 1}"
               for p, t in _texts().items() for m in WRAPPED.finditer(t)]
    assert wrapped == []
