"""Runtime findings reuse static rule codes: every (code, name) twin exists in lint/rules."""
from __future__ import annotations

import re
from pathlib import Path

from gradtrace.runtime.catalogue import RUNTIME_CODES, STATIC_TWINS

RULES = Path(__file__).resolve().parents[2] / "src" / "gradtrace" / "lint" / "rules"


def _static_rules() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in RULES.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r'code = "(GT\d{3})"\s*\n\s*name = "([a-z0-9-]+)"', text):
            found[m[1]] = m[2]
    return found


def test_static_twins_exist_with_their_names():
    rules = _static_rules()
    for kind, (code, name) in STATIC_TWINS.items():
        assert rules.get(code) == name, (kind, code, name)


def test_runtime_codes_do_not_collide_with_static_ones():
    assert not set(RUNTIME_CODES) & set(_static_rules())
