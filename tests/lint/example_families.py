"""Every rule's embedded examples by rule family (its package under gradtrace.lint.rules): one
test item per family checks them all (tests/check_each.py), not one item per example."""
from __future__ import annotations

from gradtrace.lint.registry import all_rules
from gradtrace.lint.rule import Bad


def family(rule) -> str:
    """The rule's package under gradtrace.lint.rules (its module's name if it has none)."""
    parts = rule.__module__.split(".")
    if len(parts) > 4 and parts[:3] == ["gradtrace", "lint", "rules"]:
        return parts[3]
    return rule.__module__


FAMILIES = sorted({family(rule) for rule in all_rules()})


def examples(fam: str):
    """``(id, (rule, example))`` for every example of the family's rules, ids like GT101-bad-0
    (the n-th Bad example of GT101)."""
    for rule in all_rules():
        if family(rule) != fam:
            continue
        seen = {"bad": 0, "good": 0}
        for ex in rule.examples:
            kind = "bad" if isinstance(ex, Bad) else "good"
            yield f"{rule.code}-{kind}-{seen[kind]}", (rule, ex)
            seen[kind] += 1
