"""Session 28, the lead: a crash whose cause is `dist.all_gather`'s buffers standing in for the
gathered tensor is led by the static finding that names them (GT611, fuse.py's "graph-cut"
and "ddp-unused" families), with the run's evidence attached; the slot written back is silent."""
from __future__ import annotations

from dist_helpers import marked


def test_gathered_buffers_lead_the_backward_crash(forkrun):
    res = forkrun("spawn_gather_loss.py", world=1)
    assert res.code != 0, res.out  # real torch: the loss has no grad_fn
    f = res.findings[0]
    assert (f["code"], f["line"]) == ("GT611", marked("spawn_gather_loss.py", "gathered")), res.out
    assert f["source"] == "static+runtime", f
    assert any(r["message"].startswith("confirmed at run") for r in f["related"]), f


def test_slot_written_back_is_silent(forkrun_once):
    """spawn_silent.py's `gather_slot_ok` part (its four parts share one spawn)."""
    res = forkrun_once("spawn_silent.py", parts=4)
    assert res.code == 0 and "gather_slot_ok: done True" in res.out, res.out
    assert res.findings == [], res.findings
