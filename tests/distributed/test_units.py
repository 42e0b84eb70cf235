"""Pieces of the distributed doctor that need no process group: codes, ranks, messages,
the file exchange, the merge, option parsing, hook cleanup."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import pytest

from gradtrace.code_tables.distributed import CODES
from gradtrace.runtime.distributed.info import RankInfo, check_sync_every, rank_info

# Verbatim first lines / key lines printed by torch 2.13 (CPU, gloo, 2 ranks) in this repo's
# tests/distributed/scripts.
UNUSED = ("Expected to have finished reduction in the prior iteration before starting a new one. "
          "This error indicates that your module has parameters that were not used in producing "
          "loss.\nParameter indices which did not receive grad for rank 1: 4 5\n In addition, "
          "you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL")
UNUSED_INFO = ("Expected to have finished reduction in the prior iteration before starting a "
               "new one.\nParameters which did not receive grad for rank 0: head_b.bias, "
               "head_b.weight\nParameter indices which did not receive grad for rank 0: 4 5")
TWICE = ("Expected to mark a variable ready only once. This error is caused by one of the "
         "following reasons: ...\nParameter at index 1 with name a.bias has been marked as "
         "ready twice. This means that multiple autograd engine  hooks have fired")
TIMEOUT = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
           "Timed out waiting 8000ms for recv operation to complete")
PEER = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
        "closed by peer [127.0.0.1]:14209. This is typically caused by a remote worker crashing.")


def test_codes_are_data_in_range_and_torch_free():
    for c in CODES:
        assert c.code.startswith("GT") and 880 <= int(c.code[2:]) <= 899
        assert c.name == c.name.lower() and " " not in c.name and c.summary
    code = ("import sys; import gradtrace.runtime.distributed.ranks as d; d.rank_info(); "
            "d.should_print(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("env, expected", [
    ({}, RankInfo(0, 1, 0)),
    ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}, RankInfo(1, 2, 1)),
    ({"RANK": "3", "WORLD_SIZE": "4"}, RankInfo(3, 4, 3)),
    ({"RANK": "2", "WORLD_SIZE": "2"}, RankInfo(0, 1, 0)),      # out of range
    ({"RANK": "x", "WORLD_SIZE": "2"}, RankInfo(0, 2, 0)),      # malformed rank -> 0
    ({"WORLD_SIZE": "zero"}, RankInfo(0, 1, 0)),
])
def test_rank_info(env, expected):
    assert rank_info(env) == expected


def test_check_sync_env():
    assert check_sync_every({}) == 0
    assert check_sync_every({"GRADTRACE_CHECK_SYNC": "50"}) == 50
    assert check_sync_every({"GRADTRACE_CHECK_SYNC": "-3"}) == 0
    assert check_sync_every({"GRADTRACE_CHECK_SYNC": "often"}) == 0


@pytest.mark.parametrize("text, kind", [(UNUSED, "unused"), (UNUSED_INFO, "unused"),
                                        (TWICE, "ready-twice"), (TIMEOUT, "timeout"),
                                        (PEER, "peer-closed"), ("CUDA out of memory", "")],
                         ids=["unused", "unused-info", "twice", "timeout", "peer", "other"])
def test_error_kind(text, kind):
    from gradtrace.runtime.distributed.diagnose import error_kind

    assert error_kind(text) == kind


def test_message_parsing():
    from gradtrace.runtime.distributed.diagnose import INDICES_RE, NAMES_RE, TWICE_PARAM_RE

    assert INDICES_RE.search(UNUSED).group(2).split() == ["4", "5"]
    assert NAMES_RE.search(UNUSED_INFO).group(2).strip() == "head_b.bias, head_b.weight"
    m = TWICE_PARAM_RE.search(TWICE)
    assert (m.group(1), m.group(2)) == ("1", "a.bias")


def test_reducer_order_matches_ddp_indices():
    import torch.nn as nn

    from gradtrace.runtime.distributed.diagnose import reducer_params

    class Fake:
        parameters_to_ignore = {"skip.weight"}

    net = nn.Module()
    net.body, net.frozen, net.skip = nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 2)
    net.frozen.requires_grad_(False)
    net.tied = net.body  # shared module: counted once
    fake = Fake()
    fake.module = net
    names = [n for n, _ in reducer_params(fake)]
    assert names == ["body.weight", "body.bias", "skip.bias"]


def _rec(rank, facts=None, findings=(), final=True, **extra):
    return {"rank": rank, "final": final, "status": "crashed", "facts": facts or {},
            "counts": {"forward": 2, "backward": 1, "steps": 1},
            "findings": [f.to_dict() for f in findings], **extra}


def test_merge_all_unused_and_branch():
    from gradtrace.runtime.distributed.merge import merge_records

    aux = {"name": "aux.weight", "module": "aux", "why": "not-run", "site": ["t.py", 12, ""]}
    hb = {"name": "head_b.weight", "module": "head_b", "why": "not-run",
          "site": ["t.py", 14, ""]}
    r0 = _rec(0, {"kind": "unused", "iteration": 1, "site": ["t.py", 30, ""],
                  "params": [aux, hb], "used": {"head_a": ["t.py", 20, "forward"]}})
    r1 = _rec(1, {"kind": "unused", "iteration": 1, "site": ["t.py", 30, ""],
                  "params": [aux], "used": {"head_b": ["t.py", 19, "forward"]}})
    out = merge_records([r0, r1], 2)
    assert [f.code for f in out] == ["GT880", "GT881"]
    assert out[0].line == 12 and "aux.weight" in out[0].message and "ranks 0, 1" in \
        out[0].message
    assert out[1].line == 19 and "got gradients on rank 1 but not on rank 0" in out[1].message


def test_merge_branch_from_a_peer_stuck_in_the_all_reduce():
    """Rank 1 skipped `roi` and failed at its next forward; rank 0, which ran `roi` in that
    iteration, saw only the connection close: a branch taken on rank 0 only, and no separate
    out-of-step report for the collective rank 1's error ended."""
    from gradtrace.runtime.distributed.merge import merge_records

    roi = {"name": "roi.weight", "module": "roi", "why": "not-run", "site": ["t.py", 12, ""]}
    r0 = _rec(0, {"kind": "peer-closed", "iteration": 1, "site": ["t.py", 40, ""],
                  "error": "Connection closed by peer", "used": {"roi": ["t.py", 21, "fwd"]}})
    r1 = _rec(1, {"kind": "unused", "iteration": 1, "site": ["t.py", 38, ""], "params": [roi],
                  "used": {}})
    out = merge_records([r0, r1], 2)
    assert [f.code for f in out] == ["GT881"], out
    assert out[0].line == 21 and "got gradients on rank 0 but not on rank 1" in out[0].message
    r0["facts"]["iteration"] = 2  # another iteration: no evidence of a branch
    assert [f.code for f in merge_records([r0, r1], 2)] == ["GT880"]


LOOPS = {
    "guarded backward": (
        "for step in range(3):\n"
        "    loss = model(x).sum()\n"          # 2: forward
        "    if rank == 0:\n"                  # 3: root
        "        loss.backward()\n"            # 4: backward
        "        opt.step()\n", 2, 4, 3),
    "continue": (
        "def train(model, rank):\n"
        "    for step in range(3):\n"
        "        loss = model(x).sum()\n"      # 3: forward
        "        if rank == 1 and step == 1:\n"  # 4: root
        "            continue\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n", 3, 7, 4),  # 7: backward
    "other function": (  # forward and backward in different functions: no guess
        "def fwd():\n"
        "    return model(x).sum()\n"
        "if rank == 0:\n"
        "    fwd().backward()\n", 2, 4, None),
}


@pytest.mark.parametrize("shape", sorted(LOOPS))
def test_collective_failure_names_where_the_ranks_parted(tmp_path, shape):
    """GT883 leads with the `if` a rank that ran a forward without a backward took apart from
    the others (NOTE in merge._divergence); without one, the collective's own line."""
    from gradtrace.runtime.distributed.merge import merge_records

    text, fwd, bwd, root = LOOPS[shape]
    path = tmp_path / "train.py"
    path.write_text(text)
    p = str(path)
    r0 = _rec(0, {"kind": "timeout", "iteration": 2, "site": [p, bwd, ""],
                  "error": "Timed out waiting 5000ms for recv"}, backward_site=[p, bwd],
              counts={"forward": 2, "backward": 2, "steps": 1})
    r1 = _rec(1, status="finished", skipped=[[1, [p, fwd, "train"]]], backward_site=None,
              counts={"forward": 3, "backward": 0, "steps": 0})
    out = merge_records([r0, r1], 2)
    assert [f.code for f in out] == ["GT883"]
    assert out[0].line == (root or bwd), out[0]
    if root:
        assert (out[0].related[-1].line, out[0].related[-1].message) == (
            bwd, "the collective failed here on rank 0")


def test_merge_plain_findings_labels_ranks():
    from gradtrace.findings import Finding
    from gradtrace.runtime.distributed.merge import merge_records

    a = Finding("GT823", "x", "grads accumulate", "t.py", 5, source="runtime")
    b = Finding("GT824", "y", "clip after step", "t.py", 9, source="runtime")
    out = merge_records([_rec(0, findings=[a, b]), _rec(1, findings=[a])], 2)
    msgs = {f.code: f.message for f in out}
    assert msgs == {"GT823": "[all 2 ranks] grads accumulate", "GT824": "[rank 0] clip after step"}
    assert merge_records([_rec(0, findings=[a])], 1)[0].message == "grads accumulate"


def test_merge_names_a_rank_that_did_not_report():
    from gradtrace.runtime.distributed.merge import merge_records

    r1 = {"rank": 1, "final": False, "status": "no-report", "waited": 5.0,
          "counts": {"forward": 7, "backward": 6, "steps": 6}, "where": ["t.py", 44, "main"]}
    out = merge_records([_rec(0), r1], 2)
    assert [f.code for f in out] == ["GT886"]
    assert out[0].line == 44 and "rank 1 did not report" in out[0].message


def test_exchange_gather_and_done(tmp_path):
    from gradtrace.runtime.distributed.gather import Exchange

    env = {"GRADTRACE_DDP_DIR": str(tmp_path), "MASTER_PORT": "1234"}
    zero, one = Exchange(RankInfo(0, 2, 0), env), Exchange(RankInfo(1, 2, 1), env)
    assert zero.dir == one.dir and zero.expected == [0, 1]
    one.write_beat({"rank": 1, "started": time.time(), "counts": {}, "where": ["t.py", 3, "f"]})
    t0 = time.monotonic()
    got = zero.gather({"rank": 0, "final": True}, wait=0.3)
    assert time.monotonic() - t0 >= 0.3
    assert got[1]["final"] is False and got[1]["where"] == ["t.py", 3, "f"]
    one.write_final({"rank": 1, "final": True, "started": time.time()})
    assert zero.gather({"rank": 0, "final": True}, wait=5)[1]["final"] is True
    waiter = threading.Thread(target=zero.mark_done)
    waiter.start()
    assert one.wait_done(5.0)
    waiter.join()


def test_run_check_sync_option_parsing():
    from gradtrace.runtime.runner import main, parse_args

    assert parse_args(["--check-sync", "5", "t.py", "--lr", "1"]).check_sync == 5
    assert parse_args(["--check-sync=7", "t.py"]).check_sync == 7
    assert parse_args(["t.py", "--check-sync", "3"]).check_sync is None  # the program's own
    assert main(["--check-sync", "-1", "t.py"]) == 2


def test_session_removes_every_hook_and_thread(monkeypatch, tmp_path):
    import torch
    import torch.nn as nn
    from torch.nn.modules import module as mm
    from torch.optim import optimizer as om

    import gradtrace
    from gradtrace.runtime.distributed.ranks import rank_session

    monkeypatch.setenv("GRADTRACE_DDP_DIR", str(tmp_path))
    before = (len(mm._global_forward_pre_hooks), len(om._global_optimizer_pre_hooks), 0)
    m = nn.Linear(2, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with gradtrace.trace() as tr, rank_session(tr, info=RankInfo(0, 2, 0)) as rs:
        assert len(mm._global_forward_pre_hooks) == before[0] + 2  # tracer's + ours
        assert any(t.name == "gradtrace-heartbeat" for t in threading.enumerate())
        m(torch.randn(3, 2)).sum().backward()
        opt.step()
        assert rs.progress.steps == 1
    beats = [t for t in threading.enumerate() if t.name == "gradtrace-heartbeat"]
    after = (len(mm._global_forward_pre_hooks), len(om._global_optimizer_pre_hooks), len(beats))
    assert after == before


def _run_as(rank: int, tmp_path, monkeypatch, capsys, done: bool,
            src: str = "x = 1\n") -> tuple[int, str, bool]:
    from gradtrace.runtime.distributed.gather import Exchange
    from gradtrace.runtime.runner import main

    env = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
           "MASTER_PORT": "4321", "GRADTRACE_DDP_DIR": str(tmp_path / "x"),
           "GRADTRACE_GATHER_TIMEOUT": "0.5"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if done:  # rank 0 has already merged and printed
        Exchange(RankInfo(0, 2, 0)).mark_done()
    script = tmp_path / "prog.py"
    script.write_text(src)
    out = tmp_path / f"rank{rank}.json"
    code = main(["--json-out", str(out), str(script)])
    return code, capsys.readouterr().err, out.exists()


def test_only_rank_0_writes_json_and_prints(tmp_path, monkeypatch, capsys):
    code, err, wrote = _run_as(1, tmp_path, monkeypatch, capsys, done=True)
    assert (code, err, wrote) == (0, "", False)
    code, err, wrote = _run_as(0, tmp_path, monkeypatch, capsys, done=False)
    assert code == 0 and wrote  # rank 1's record was there: no waiting


def test_rank_1_reports_itself_when_rank_0_never_does(tmp_path, monkeypatch, capsys):
    t0 = time.monotonic()
    code, err, wrote = _run_as(1, tmp_path, monkeypatch, capsys, done=False,
                               src="import torch\nw = torch.ones(2, requires_grad=True)\n"
                                   "w.grad.zero_()\n")
    assert code == 1 and wrote
    assert 1.5 <= time.monotonic() - t0 < 10  # waited 1.2 * 0.5 + 1 s for rank 0
    assert "this is rank 1's own report" in err


def test_rank_1_with_nothing_to_say_stays_silent(tmp_path, monkeypatch, capsys):
    code, err, wrote = _run_as(1, tmp_path, monkeypatch, capsys, done=False)
    assert (code, err, wrote) == (0, "", False)


@pytest.mark.parametrize("text, code", [(UNUSED, "GT880"), (TWICE, "GT882"), (TIMEOUT, "GT885"),
                                        (PEER, "GT885")], ids=["unused", "twice", "timeout",
                                                               "peer"])
def test_explain_cli_knows_distributed_messages(text, code, cli_inproc):
    """`gradtrace explain` through `gradtrace.cli.main` in this process (tests/conftest.py's
    cli_inproc; `python -m gradtrace` itself is run as a subprocess in tests/test_cli.py)."""
    res = cli_inproc("explain", f"RuntimeError: {text}")
    out, err = res.stdout.decode(), res.stderr.decode()
    assert res.returncode == 0, err
    assert re.search(rf"\b{code}\b", out), out
    if text is UNUSED:
        assert "parameter indices 4 5 on rank 1" in out
