"""Session 36 (docs/triage/runtime36.md): DDP's sync flag set after the forward
(NOTE [sync flag turned on after the forward]), confirmed at run time, the assignment named."""
from __future__ import annotations

from dist_helpers import marked


def test_sync_flag_set_after_the_forward_names_the_assignment(forkrun):
    res = forkrun("late_sync_flag.py")
    assert res.code == 0, res.out
    assert "replicas equal: False" in res.out
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT542", marked("late_sync_flag.py", "flag")), \
        res.out
    evidence = next(r["message"] for r in first["related"] if "confirmed at run time" in r["message"])
    assert "GT887" in evidence and "on again by the step" in evidence, evidence


def test_sync_flag_set_before_the_forward_is_silent(forkrun):
    res = forkrun("late_sync_flag_ok.py")
    assert res.code == 0, res.out
    assert "replicas equal: True" in res.out
    assert res.codes() == [], res.findings
