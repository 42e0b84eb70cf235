"""Every rule's embedded Bad/Good examples are its tests (ids like GT101-bad-0)."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source
from gradtrace.lint.fix import fix_text
from gradtrace.lint.registry import all_rules
from gradtrace.lint.rule import Bad, Good


def _cases():
    for rule in all_rules():
        bad = good = 0
        for ex in rule.examples:
            if isinstance(ex, Bad):
                yield pytest.param(rule, ex, id=f"{rule.code}-bad-{bad}")
                bad += 1
            else:
                yield pytest.param(rule, ex, id=f"{rule.code}-good-{good}")
                good += 1


@pytest.mark.parametrize(("rule", "example"), list(_cases()))
def test_example(rule, example, monkeypatch):
    monkeypatch.setenv("GRADTRACE_STRICT", "1")  # a rule crash fails the test
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
