"""The static checker and the runtime, fused (NOTE [ranking] in gradtrace.runtime.fuse)."""
from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn as nn

import gradtrace
from gradtrace.runtime import fuse

ONCE_PER_EPOCH = """
import torch
import torch.nn as nn
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
for epoch in range(2):
    opt.zero_grad()
    for x, y in data:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
"""


def test_static_line_leads_with_runtime_evidence(run_script):
    res = run_script(ONCE_PER_EPOCH)
    first = res.findings[0]
    assert (first["code"], first["line"], first["source"]) == ("GT502", 7, "static+runtime")
    evidence = [r for r in first["related"] if r["message"].startswith(fuse.CONFIRMED)]
    assert evidence and "(GT501)" in evidence[0]["message"] and evidence[0]["line"] == 10
    assert "prog.py:7:5: GT502" in res.err and "confirmed at run time" in res.err


def test_unrelated_crash_is_not_a_diagnosis(run_script):
    res = run_script("""
        import torch
        import torch.nn as nn
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        open("/nonexistent/gradtrace/file.txt")
    """)
    assert res.code == 1 and "FileNotFoundError" in res.err
    assert "gradtrace: diagnosis" not in res.err
    assert "problems seen, separate from the error above (1)" in res.err
    assert res.codes() == ["GT501"]


def test_error_without_diagnosis_prints_nothing_of_ours(run_script):
    res = run_script("d = {}\nd['x']\n")
    assert res.code == 1 and "KeyError" in res.err and "gradtrace" not in res.err


def test_static_only_finding_comes_after_runtime(run_script):
    res = run_script("""
        import torch
        import torch.nn as nn
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        opt2 = torch.optim.Adam(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt2.step()
    """)
    # each optimizer steps after its own backward(): the run sees no gradient applied twice
    # (NOTE [one gradient, two steps]), so GT406 stays a static-only finding
    assert [(f["code"], f["source"]) for f in res.findings] == [
        ("GT501", "static+runtime"), ("GT501", "runtime"), ("GT406", "static")], res.findings
    assert res.err.index("problems seen (2)") < res.err.index(
        "found by reading the code that ran (1)")


def test_static_finding_confirmed_by_gradient_applied_twice(run_script):
    # both optimizers step the gradient of one backward(): the run confirms the static GT406
    res = run_script("""
        import torch
        import torch.nn as nn
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        opt2 = torch.optim.Adam(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            opt2.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            opt2.step()
    """)
    assert [(f["code"], f["source"], f["line"]) for f in res.findings][:1] == [
        ("GT406", "static+runtime", 5)], res.findings


def test_refuted_static_finding_is_left_out(run_script):
    # the checker reads `feats` as computed only under no_grad; the run shows head trains
    res = run_script("""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        enc, head = nn.Linear(4, 8), nn.Linear(8, 1)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        for _ in range(3):
            opt.zero_grad()
            with torch.no_grad():
                feats = enc(x)
            F.mse_loss(head(feats), y).backward()
            opt.step()
    """)
    assert res.code == 0 and res.findings == [], res.err


def test_trace_in_process_fuses_and_can_opt_out(tmp_path):
    src = tmp_path / "steps.py"
    src.write_text(ONCE_PER_EPOCH.replace("for epoch", "def train():\n  for epoch")
                   .replace("\n    ", "\n      "))
    ns: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    with gradtrace.trace() as tr:
        ns["train"]()
    with gradtrace.trace(static=False) as plain:
        ns["train"]()
    assert [(f.code, f.source) for f in tr.findings] == [("GT502", "static+runtime")]
    assert [(f.code, f.source) for f in plain.findings] == [("GT501", "runtime")]


def test_static_findings_are_cached_per_file_version(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch\nx = torch.ones(1)\nx.item().backward()\n")
    first = fuse.static_findings(str(path))
    assert [f.code for f in first] == ["GT101"]
    assert fuse.static_findings(str(path)) is first
    path.write_text("import torch\nx = torch.ones(1)\n")
    os.utime(path, ns=(1, 1))
    assert fuse.static_findings(str(path)) == []


def test_library_files_are_not_user_files():
    assert not fuse.is_user_file(torch.__file__)
    assert not fuse.is_user_file(os.__file__)
    assert not fuse.is_user_file(gradtrace.__file__)
    assert fuse.is_user_file(__file__)
    assert fuse.is_user_file("<ipython-input-3-abc>") and not fuse.is_user_file("<string>")


def test_no_torch_module_checked_when_nothing_ran():
    with gradtrace.trace() as tr:
        nn.Linear(2, 2)
    assert tr.findings == []


def test_report_holds_the_printed_diagnosis(run_script, tmp_path):
    src = (Path(__file__).resolve().parents[2] / "examples" / "runtime"
           / "encoder_detached.py").read_text()
    res = run_script(src, extra=["--report", str(tmp_path / "r.html")])
    html = (tmp_path / "r.html").read_text()
    assert res.findings[0]["code"] == "GT107", res.err
    assert "GT107" in html and "never received a gradient" in html
    assert "GT850" not in html  # the watch card is replaced by the run's cut line


# The run watches a kept graph only on an in-place running total (`total += loss`): a list of
# outputs or `total = total + loss` shows no torch-level symptom, so a clean run refutes neither.
KEPT_GRAPHS = """
import torch
import torch.nn as nn

def fit(net, opt, batches):
    {init}
    for xb, yb in batches:
        opt.zero_grad()
        err = nn.functional.mse_loss(net(xb), yb)
        err.backward()
        opt.step()
        {keep}
    return {ret}

net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
fit(net, opt, [(torch.randn(5, 3), torch.randn(5, 1)) for _ in range(4)])
"""


def test_kept_graph_in_a_list_is_not_refuted_by_a_clean_run(run_script):
    res = run_script(KEPT_GRAPHS.format(init="history = []", keep="history.append(err)",
                                        ret="history"))
    assert [(f["code"], f["line"], f["source"]) for f in res.findings] == [
        ("GT505", 11, "static")], res.err


def test_kept_graph_in_a_rebound_sum_is_not_refuted(run_script):
    res = run_script(KEPT_GRAPHS.format(init="running = 0", keep="running = running + err",
                                        ret="running"))
    assert [(f["code"], f["line"]) for f in res.findings] == [("GT505", 11)], res.err


def test_detached_list_look_alike_stays_silent(run_script):
    res = run_script(KEPT_GRAPHS.format(init="history = []", keep="history.append(err.detach())",
                                        ret="history"))
    assert res.findings == [], res.err


# Graph-WaveNet (docs/triage/unseen14.md): `self.nodevec1 = nn.Parameter(initemb1).to(device)`
# (GT403, static) sat in the file where the run found the last block's BatchNorm never graded
# (GT820, its output unused): the fallback "same file" fused them. What GT403 reports is a copy
# that is never a registered parameter, so it is never among the parameters GT820 names.
UNGRADED_TAIL = """
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1)).to(torch.float32)
        self.head = nn.Linear(4, 1)
        self.tail = nn.Linear(4, 4)
    def forward(self, x):
        skip = self.head(x) * self.scale
        x = self.tail(x)
        return skip
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
"""


def test_moved_parameter_does_not_account_for_ungraded_layers(run_script):
    res = run_script(UNGRADED_TAIL)
    got = [(f["code"], f["source"]) for f in res.findings]
    # `tail` ran and its output was dropped: never graded by design, no runtime finding of its
    # own (NOTE [never graded by design]); GT403 stays static, unconfirmed
    assert ("GT820", "runtime") not in got and ("GT403", "static") in got, res.findings
    assert "confirmed at run time (GT820)" not in res.err
    assert "scale" in dict(_net_params(UNGRADED_TAIL))  # registered


def test_moved_parameter_copy_is_still_reported_beside_ungraded_layers(run_script):
    # twin: the move is a real cast (float64), so `scale` is an unregistered copy: GT403 is
    # still reported (the dropped `tail` output gets no runtime finding, as above)
    res = run_script(UNGRADED_TAIL.replace(
        ".to(torch.float32)", ".to(torch.float64)"))
    got = [(f["code"], f["source"]) for f in res.findings]
    assert ("GT820", "runtime") not in got and ("GT403", "static") in got, res.findings
    assert "scale" not in dict(_net_params(UNGRADED_TAIL.replace(
        ".to(torch.float32)", ".to(torch.float64)")))


def _net_params(src: str) -> list[tuple[str, object]]:
    env: dict = {}
    exec(src.split("model = Net()")[0], env)
    return list(env["Net"]().named_parameters())


FUNCTIONAL_DROPOUT_IN_EVAL = """
import torch
import torch.nn as nn
import torch.nn.functional as F
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        return F.dropout(self.fc(x), 0.5)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(8, 4)).sum().backward()
    opt.step()
net.eval()
with torch.no_grad():
    a, b = net(torch.ones(2, 4)), net(torch.ones(2, 4))
print(bool((a != b).any()))
"""


def test_static_twin_of_a_silent_run_diagnosis_leads(run_script):
    """GT875 (run) and GT548 (check) name the same call: one finding, from both faces."""
    res = run_script(FUNCTIONAL_DROPOUT_IN_EVAL)
    assert [(f["code"], f["line"], f["source"]) for f in res.findings] == [
        ("GT875", 9, "static+runtime")], res.findings


# A scheduler stepped where the optimizer belongs in a per-batch method: the run sees no step
# (GT913) and the static GT544 that says why is fused with it (the "never-stepped" family; on
# another line the static finding leads: realworld pairedcyclegan GT539, torcheasyrec GT429).
SCHEDULER_FOR_OPTIMIZER = """
import torch
import torch.nn as nn


class Learner:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, 10)

    def train_batch(self, x, y):
        self.opt.zero_grad()
        loss = ((self.net(x) - y) ** 2).mean()
        loss.backward()
        self.sched.step()


learner = Learner(nn.Linear(4, 1))
for _ in range(4):
    learner.train_batch(torch.randn(8, 4), torch.randn(8, 1))
"""


def test_no_step_explained_by_static_finding(run_script):
    res = run_script(SCHEDULER_FOR_OPTIMIZER)
    first = res.findings[0]
    assert (first["code"], first["line"], first["source"]) == ("GT913", 15, "static+runtime")
    assert any(r["line"] == 15 and "(GT544)" in r["message"] for r in first["related"])
