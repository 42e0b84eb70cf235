"""docs/rules.md is generated from the rule classes and must not be stale."""
from __future__ import annotations

from pathlib import Path

from gradtrace.docs import explain_rule, rules_markdown
from gradtrace.lint.registry import all_rules

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules.md"


def test_rules_reference_is_up_to_date():
    assert DOCS.read_text(encoding="utf-8") == rules_markdown(), (
        "docs/rules.md is stale: run `gradtrace rules --markdown > docs/rules.md`")


def test_every_rule_is_documented_with_examples():
    text = rules_markdown()
    for r in all_rules():
        assert f"### {r.code} {r.name}" in text
        doc = explain_rule(r)
        assert "Bad:" in doc and "Good:" in doc and r.summary() in doc
