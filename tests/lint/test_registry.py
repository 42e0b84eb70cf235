"""Rules are discovered; their identities and examples are well-formed."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gradtrace.lint import registry
from gradtrace.lint.registry import all_rules, select_rules, validate_rule
from gradtrace.lint.rule import Bad, Good, Rule
from src_trees import GROUP, tree

RULES = Path(registry.__file__).parent / "rules"
# one xdist worker for the tests that parse src/ with ast: each file parsed once (src_trees.py)
pytestmark = pytest.mark.xdist_group(GROUP)


def _codes_in_source() -> set[str]:
    """Codes of the rule classes written in lint/rules, read with ast (no import)."""
    found = set()
    for path in RULES.rglob("*.py"):
        for cls in (n for n in ast.walk(tree(path)) if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == "code" for t in node.targets) and \
                        isinstance(node.value, ast.Constant) and \
                        re.fullmatch(r"GT\d{3}", str(node.value.value)):
                    found.add(node.value.value)
    return found


def test_rules_are_discovered_with_unique_codes_and_names():
    rules = all_rules()
    assert {r.code for r in rules} == _codes_in_source()  # discovery misses no module
    assert len({r.code for r in rules}) == len(rules)
    assert len({r.name for r in rules}) == len(rules)


def test_every_rule_is_well_formed():
    problems = [p for r in all_rules() for p in validate_rule(r)]
    assert problems == []


def test_every_rule_has_bad_and_good_examples():
    for r in all_rules():
        assert any(isinstance(e, Bad) for e in r.examples), r.code
        assert any(isinstance(e, Good) for e in r.examples), r.code


def test_fix_examples_match_fix_availability():
    for r in all_rules():
        has_fixed = any(isinstance(e, Bad) and e.fixed is not None for e in r.examples)
        assert has_fixed == r.has_fix(), r.code


def test_off_by_default_rules_need_selecting(monkeypatch):
    """9xx rules are off by default (none exists yet, so a stand-in checks the selection)."""

    class OptInStandIn(Rule):
        code, name, default, triggers = "GT999", "opt-in-stand-in", False, ("x",)

    assert all(not r.default for r in all_rules() if r.code.startswith("GT9"))
    monkeypatch.setattr(registry, "all_rules", lambda: (*all_rules(), OptInStandIn))
    default = {r.code for r in select_rules()}
    assert "GT999" not in default
    assert default == {r.code for r in all_rules() if r.default}
    assert OptInStandIn in select_rules(["GT9"]) and OptInStandIn in select_rules(
        extend_select=["GT999"])


def test_selection_most_specific_prefix_wins():
    codes = [r.code for r in all_rules() if r.default]
    first = codes[0]
    assert first not in [r.code for r in select_rules(["GT"], ignore=[first])]
    assert [r.code for r in select_rules([first], ignore=[first[:3]])] == [first]
    assert [r.code for r in select_rules([first[:3]], ignore=[first])] == \
        [c for c in codes if c.startswith(first[:3]) and c != first]
    assert select_rules(["ALL"], ignore=["ALL"]) == []
    assert len(select_rules(["ALL"])) == len(all_rules())


def test_rule_folders_are_packages_so_wheels_ship_them():
    from pathlib import Path

    import gradtrace.lint.rules as pkg

    root = Path(pkg.__file__).parent
    for d in root.rglob("*"):
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")):
            assert (d / "__init__.py").is_file(), f"{d} has no __init__.py"
