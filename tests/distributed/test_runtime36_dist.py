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
    assert "GT887" in evidence and "on when its backward began" in evidence, evidence


def test_sync_flag_set_before_the_forward_is_silent(forkrun):
    res = forkrun("late_sync_flag_ok.py")
    assert res.code == 0, res.out
    assert "replicas equal: True" in res.out
    assert res.codes() == [], res.findings


def test_no_sync_entered_through_a_helper_context_keeps_the_no_sync_reading(forkrun):
    """The flag is off at the forward and at the backward (a context manager of the user's
    enters `no_sync()`; the stack shows no `.no_sync` at the forward): not a late flag."""
    res = forkrun("no_sync_helper_last_micro.py")
    assert res.code == 0, res.out
    assert "replicas equal: False" in res.out
    first = res.findings[0]
    assert first["code"] == "GT887", res.out
    assert "inside `no_sync()`" in first["message"] and "backward began" not in \
        first["message"], first["message"]


def test_a_forward_alone_inside_no_sync_names_the_with_not_a_late_flag(forkrun):
    res = forkrun("no_sync_forward_only_last_micro.py")
    assert res.code == 0, res.out
    assert "replicas equal: False" in res.out
    first = res.findings[0]
    assert (first["code"], first["line"]) == (
        "GT887", marked("no_sync_forward_only_last_micro.py", "block")), res.out
    assert "inside `no_sync()`" in first["message"], first["message"]
