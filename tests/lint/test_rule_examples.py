"""Every rule's embedded Bad/Good examples are its tests (named like GT101-bad-0).

One item per rule family (its package under lint/rules/), each checking every example of its
rules and naming each failing one (tests/check_each.py): 9 items instead of one per example."""
from __future__ import annotations

import pytest

from check_each import check_each
from example_families import FAMILIES, examples
from gradtrace.lint import check_source
from gradtrace.lint.fix import fix_text
from gradtrace.lint.registry import all_rules
from gradtrace.lint.rule import Bad, Good


def test_the_families_hold_every_example():
    ids = [name for fam in FAMILIES for name, _ in examples(fam)]
    assert len(FAMILIES) >= 5 and len(ids) >= 500 and len(set(ids)) == len(ids)
    assert len(ids) == sum(len(rule.examples) for rule in all_rules())


def check_example(pair) -> None:
    rule, example = pair
    src = example.code
    found = [f for f in check_source(src, "example.py", select=[rule.code])]
    if isinstance(example, Good):
        assert found == [], f"{rule.code} fired on a Good example: {found}"
        return
    assert len(found) == example.count, f"{rule.code}: expected {example.count}, got {found}"
    assert all(f.code == rule.code and f.name == rule.name for f in found)
    if example.at is not None:
        assert (found[0].line, found[0].column) == example.at
    if example.fixed is not None:
        assert rule.has_fix(), f"{rule.code} has a fixed= example but no fix"
        out = fix_text("example.py", src, found, unsafe=True)
        assert out.error is None, out.error
        expected = Bad(example.fixed).code
        assert out.new == expected
        # a second pass changes nothing
        again = check_source(out.new, "example.py", select=[rule.code])
        assert fix_text("example.py", out.new, again, unsafe=True).new == out.new


@pytest.mark.parametrize("fam", FAMILIES)
def test_examples(fam, monkeypatch):
    monkeypatch.setenv("GRADTRACE_STRICT", "1")  # a rule crash fails the test
    assert check_each(examples(fam), check_example)
