"""`gradtrace run` on scripts that start gloo ranks with torch.multiprocessing.spawn: every
child traced, one report in the parent (NOTE [spawned ranks] in gradtrace.runtime.distributed.spawn)."""
from __future__ import annotations

from dist_helpers import SILENT_BUGS, marked, silent_bugs_expected


def test_spawned_ranks_name_the_unused_layer(forkrun):
    res = forkrun("spawn_unused.py", world=1)
    assert res.code != 0
    assert res.codes() == ["GT880"], res.out
    f = res.findings[0]
    assert f["line"] == marked("spawn_unused.py", "unused") and f["source"] == "static+runtime"
    assert "spare.weight, spare.bias" in f["message"] and "never ran" in f["message"]
    assert "rank" in f["message"]
    assert any("GT450" in r["message"] for r in f["related"])  # the static twin, attached
    assert any(r["line"] == marked("spawn_unused.py", "raised") for r in f["related"])
    assert res.out.count("gradtrace: diagnosis") == 1  # the parent prints, the ranks do not


def test_spawned_correct_training_gives_no_finding(forkrun_once):
    """spawn_silent.py's `correct` part (its four parts share one spawn)."""
    res = forkrun_once("spawn_silent.py", parts=4)
    assert res.code == 0, res.out
    assert "correct: replicas equal: True" in res.out  # the program's own result, unchanged
    assert res.doc.get("tool") == "gradtrace" and res.findings == [], res.findings
    assert "gradtrace:" not in res.out


def test_spawned_ranks_stepping_gradients_ddp_never_reduced(forkrun_once):
    """The forward through `model.module` (picked by a helper): every step applies the rank's
    own gradients (GT887, NOTE [steps without all-reduce]); torch confirms the drift.
    spawn_silent_bugs.py's `bypass` part (its three parts share one spawn)."""
    res = forkrun_once(SILENT_BUGS, parts=3)
    assert res.code == 0, res.out
    assert "bypass: replicas equal: False" in res.out
    assert [(f["code"], f["line"]) for f in res.findings] == silent_bugs_expected(), res.out
    f = res.findings[1]  # the part's GT887, ahead of its static twin GT453
    assert f["line"] == marked(SILENT_BUGS, "bypass")
    assert "optimizer step 1 (and 2 later step(s)) on ranks 0, 1" in f["message"]
    assert "through the module inside DistributedDataParallel" in f["message"]
    assert [r["line"] for r in f["related"]][:1] == [marked(SILENT_BUGS, "step")]


def test_spawned_ranks_with_parameters_in_another_order(forkrun_once):
    """Heads registered in another order on rank 1: same shapes, so DDP averages one head's
    gradient into the other's without an error (GT888, NOTE [parameter layout across ranks]).
    spawn_silent_bugs.py's `order` part: its one finding is GT888 (the others are the two
    bypass parts')."""
    res = forkrun_once(SILENT_BUGS, parts=3)
    assert res.code == 0 and "order: done True" in res.out, res.out
    assert [(f["code"], f["line"]) for f in res.findings] == silent_bugs_expected(), res.out
    assert [f["code"] for f in res.findings].count("GT888") == 1
    f = res.findings[0]
    assert f["line"] == marked(SILENT_BUGS, "registered")
    assert "position 2 is `heads.depth.weight` on rank 0 but `heads.normals.weight` on rank 1" \
        in f["message"], f["message"]
    assert "same shape: no error" in f["message"]
    assert [r["line"] for r in f["related"]] == [marked(SILENT_BUGS, "wrapped")]


def test_output_left_out_under_find_unused_parameters_is_silent(forkrun_once):
    """DDP(find_unused_parameters=True) declares that a forward may leave parameters out of
    the loss: the ignored auxiliary head is no finding (the same model without the flag is
    GT880; the single-process form is silent too, NOTE [never graded by design]:
    tests/runtime/test_stale_optimizer.py). spawn_silent.py's `declared_unused` part."""
    res = forkrun_once("spawn_silent.py", parts=4)
    assert res.code == 0 and "declared_unused: done True" in res.out, res.out
    assert res.findings == [], res.findings


def test_forked_ranks_code_counts_as_run(forkrun):
    """Ranks forked by `start_processes(..., start_method="fork")`: the worker ran only in the
    children, and their spans reach the parent (NOTE [forked ranks]), so the checker's GT472 on
    the worker's all-reduce is reported (it was dropped as code that never ran)."""
    res = forkrun("fork_summed.py", world=1)
    assert res.code == 0 and "done" in res.out, res.out
    assert [(f["code"], f["line"], f["source"]) for f in res.findings] == [
        ("GT472", marked("fork_summed.py", "summed"), "static")], res.out


def test_forked_ranks_averaging_their_gradients_give_no_finding(forkrun):
    res = forkrun("fork_summed_ok.py", world=1)
    assert res.code == 0 and "done" in res.out, res.out
    assert res.findings == [], res.out
