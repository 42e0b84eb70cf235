"""`gradtrace run` in two ranks on real gloo process groups (loopback): the first test under
the real `torchrun --nproc-per-node=2` (the launcher's face: its agent, its environment, its
ending of the ranks on a crash), the others in ranks forked with torchrun's environment
(`forkrun`: torch imported once, conftest.py; a real launch costs three imports of torch)."""
from __future__ import annotations

import re

from dist_helpers import marked


def test_unused_head_names_parameters_and_why(torchrun):
    res = torchrun("unused_head.py")
    assert res.code != 0
    assert res.codes() == ["GT880"], res.out
    f = res.findings[0]
    assert f["line"] == marked("unused_head.py", "unused")
    assert "aux.weight, aux.bias" in f["message"] and "ranks 0, 1" in f["message"]
    assert "never ran in a forward pass" in f["message"]
    assert "find_unused_parameters=True" in f["fix"]["title"]
    assert "static_graph=True" in f["fix"]["title"]
    assert any(r["line"] == marked("unused_head.py", "raised") for r in f["related"])
    assert res.out.count("gradtrace: diagnosis") == 1  # rank 0 only


def test_rank_dependent_branch(forkrun):
    res = forkrun("branch.py")
    assert res.code != 0
    # the static GT451 (the wrapper lacks find_unused_parameters=True) confirmed at run time
    # by one branch's GT881 leads (rank 0's merge fuses); the other branch's GT881 follows
    assert res.codes() == ["GT451", "GT881"], res.out
    wrap = res.findings[0]
    assert wrap["line"] == marked("branch.py", "wrap") and wrap["source"] == "static+runtime"
    confirmed = [r for r in wrap["related"] if "confirmed at run time (GT881)" in r["message"]]
    by_line = {f["line"]: f["message"] for f in res.findings if f["code"] == "GT881"}
    by_line.update({r["line"]: r["message"] for r in confirmed})
    b, a = marked("branch.py", "branch b"), marked("branch.py", "branch a")
    assert set(by_line) == {a, b}
    assert "head_b.weight, head_b.bias got gradients on rank 1 but not on rank 0" in by_line[b]
    assert "head_a.weight, head_a.bias got gradients on rank 0 but not on rank 1" in by_line[a]
    assert "find_unused_parameters=True" in next(
        f for f in res.findings if f["code"] == "GT881")["fix"]["title"]


def test_check_sync_finds_gradients_never_averaged(forkrun):
    res = forkrun("no_sync_mistake.py", "--check-sync", "2")
    assert res.code == 0, res.out
    # the cause, seen without a collective (NOTE [steps without all-reduce]), then the check
    assert res.codes() == ["GT887", "GT884"], res.out  # GT884: steps 2 and 4, one finding
    cause = res.findings[0]
    assert cause["line"] == marked("no_sync_mistake.py", "never synced")
    assert "optimizer step 1 (and 3 later step(s)) on ranks 0, 1" in cause["message"]
    assert "inside `no_sync()`" in cause["message"]
    assert [r["line"] for r in cause["related"]] == [
        marked("no_sync_mistake.py", "never synced") + 1, marked("no_sync_mistake.py", "step")]
    f = res.findings[1]
    assert f["line"] == marked("no_sync_mistake.py", "step")
    assert "at optimizer step 2, and at 1 later check(s)" in f["message"]
    assert "ranks 0, 1" in f["message"]
    for name in ("0.weight", "0.bias", "2.weight", "2.bias"):
        assert name in f["message"]
    assert "no_sync()" in f["message"]


def test_correct_model_gives_no_finding(forkrun):
    """Precision: a correct loop, its gradients compared across ranks at every step."""
    res = forkrun("correct.py", "--check-sync", "1")
    assert res.code == 0, res.out
    assert res.doc.get("tool") == "gradtrace", res.out  # the JSON was written (by rank 0)
    assert res.findings == [], res.findings
    assert "gradtrace:" not in res.out
    assert len(set(re.findall(r"rank (\d) ok 6 digest", res.out))) == 2, res.out


def test_parameter_marked_ready_twice(forkrun):
    res = forkrun("ready_twice.py")
    assert res.code != 0
    assert res.codes() == ["GT882"], res.out
    f = res.findings[0]
    assert "parameter block.bias" in f["message"] or "parameter block.weight" in f["message"]
    assert "ranks 0, 1" in f["message"] and "called 2 times" in f["message"]
    assert "reentrant" in f["message"] and "use_reentrant=False" in f["fix"]["title"]
    assert f["line"] == marked("ready_twice.py", "first")
    assert [r["line"] for r in f["related"]] == [marked("ready_twice.py", "again"),
                                                 marked("ready_twice.py", "raised"),
                                                 marked("ready_twice.py", "first")]
    # the checker reads the same cause (GT460, NOTE [crash in related]'s fuse family)
    assert "(GT460)" in f["related"][-1]["message"]


def test_rank_skipping_a_step_times_out_and_is_named(forkrun):
    res = forkrun("skip_step.py")
    assert res.code != 0
    assert "GT883" in res.codes(), res.out
    f = res.only("GT883")[0]
    assert "rank 0: 3 DDP forward, 3 backward" in f["message"], f["message"]
    assert "rank 1: 3 DDP forward, 2 backward" in f["message"], f["message"]
    assert any("without a backward()" in r["message"] and r["line"] ==
               marked("skip_step.py", "forward") for r in f["related"]), f["related"]


def test_rank_1_reports_where_a_stuck_rank_0_was(forkrun):
    res = forkrun("rank0_stuck.py", env={"GRADTRACE_GATHER_TIMEOUT": "2"})
    assert res.code != 0
    assert "rank 0 did not report within 3.4 s; this is rank 1's own report" in res.out, res.out
    f = res.only("GT883")[0]
    assert f["line"] == marked("rank0_stuck.py", "times out")
    assert "rank 0: 2 DDP forward, 1 backward" in f["message"]
    assert "rank 1: 2 DDP forward, 2 backward" in f["message"]
    assert [(r["line"], r["message"]) for r in f["related"]] == [
        (marked("rank0_stuck.py", "stuck"), "rank 0 was here when last seen")]


def test_several_forwards_with_find_unused_name_the_flag(forkrun):
    """The DDP model itself runs twice before one backward() with find_unused_parameters=True:
    the constructor's flag is the line to change (transformers#24970 in another spelling);
    without the flag the same loop trains."""
    res = forkrun("multi_view_find_unused.py")
    assert res.code != 0
    f = res.findings[0]
    assert (f["code"], f["line"]) == ("GT882", marked("multi_view_find_unused.py", "flag")), res.out
    assert f["related"][-1]["line"] == marked("multi_view_find_unused.py", "raised")
    ok = forkrun("multi_view_correct.py")
    assert ok.code == 0 and ok.findings == [], ok.out
