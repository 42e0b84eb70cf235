"""Session 35 (docs/triage/runtime35.md): the last micro-batch before a step inside no_sync()
(NOTE [last micro-batch inside no_sync]), named where the context was chosen."""
from __future__ import annotations

from dist_helpers import marked


def test_last_micro_batch_inside_no_sync_names_the_choice(forkrun):
    res = forkrun("no_sync_last_micro.py")
    assert res.code == 0, res.out
    assert "replicas equal: False" in res.out
    assert res.codes()[:1] == ["GT887"], res.out
    assert res.findings[0]["line"] == marked("no_sync_last_micro.py", "choice")


def test_first_micro_batches_inside_no_sync_are_silent(forkrun):
    res = forkrun("no_sync_last_micro_ok.py")
    assert res.code == 0, res.out
    assert "replicas equal: True" in res.out
    assert "GT887" not in res.codes(), res.findings
