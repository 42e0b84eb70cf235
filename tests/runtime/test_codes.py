"""Runtime findings reuse static rule codes: every (code, name) twin exists in lint/rules."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from gradtrace.codes import TABLE
from gradtrace.runtime.catalogue import STATIC_TWINS
from src_trees import GROUP, tree

RULES = Path(__file__).resolve().parents[2] / "src" / "gradtrace" / "lint" / "rules"
# one xdist worker for the tests that parse src/ with ast: each file parsed once (src_trees.py)
pytestmark = pytest.mark.xdist_group(GROUP)


def _static_rules() -> dict[str, str]:
    """code -> name of every rule class in lint/rules (read with ast, no import)."""
    return dict(_read_static_rules())


@functools.lru_cache(maxsize=1)  # both tests read it: lint/rules parsed once per process
def _read_static_rules() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in RULES.rglob("*.py"):
        for cls in (n for n in ast.walk(tree(path)) if isinstance(n, ast.ClassDef)):
            attrs = {t.id: node.value.value for node in cls.body
                     if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                     for t in node.targets if isinstance(t, ast.Name)}
            code, name = attrs.get("code"), attrs.get("name")
            if isinstance(code, str) and re.fullmatch(r"GT\d{3}", code) and isinstance(name, str):
                found[code] = name
    return found


def test_static_twins_exist_with_their_names():
    rules = _static_rules()
    for kind, (code, name) in STATIC_TWINS.items():
        assert rules.get(code) == name, (kind, code, name)


def test_runtime_codes_do_not_collide_with_static_ones():
    assert not set(TABLE) & set(_static_rules())
