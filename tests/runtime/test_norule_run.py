"""`gradtrace run` on the held-out 9 mechanisms that had no rule (docs/triage/norule.md): the
static finding on the code that ran leads, confirmed by the crash it explains (a param group
added after the scheduler: NOTE [crash in related] in gradtrace.runtime.fuse), or alone when the
bug is silent (an EMA copy that copies nothing, a hooked module run through `.forward`). The
correct look-alikes run with no finding. Real torch."""
from __future__ import annotations

from gradtrace.findings import Finding, Related
from gradtrace.runtime import fuse

# LambdaLR over a one-group optimizer, the backbone's group added at epoch 1 in a method
LAMBDA_AFTER = """
import torch
import torch.nn as nn


class Finetune:
    def __init__(self):
        self.body, self.head = nn.Linear(3, 4), nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.head.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda e: 0.9 ** e)

    def unfreeze(self):
        self.opt.add_param_group({"params": self.body.parameters(), "lr": 0.01})

    def epoch(self):
        self.opt.zero_grad()
        self.head(self.body(torch.randn(2, 3))).sum().backward()
        self.opt.step()
        self.sched.step()


job = Finetune()
for e in range(3):
    if e == 1:
        job.unfreeze()
    job.epoch()
"""
LAMBDA_REBUILT_OK = LAMBDA_AFTER.replace(
    '"lr": 0.01})\n', '"lr": 0.01})\n        self.sched = torch.optim.lr_scheduler.LambdaLR('
    'self.opt, lambda e: 0.9 ** e)\n')

EMA_SELF = """
import torch
import torch.nn as nn

model, ema = nn.Linear(3, 2), nn.Linear(3, 2)
ema.load_state_dict(model.state_dict())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(4, 3)).pow(2).mean().backward()
    opt.step()
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters()):
            e.mul_(0.9).add_(0.1 * e)
"""
EMA_OK = EMA_SELF.replace("add_(0.1 * e)", "add_(0.1 * p)")


def test_group_added_after_scheduler_leads_confirmed_by_the_crash(run_script):
    res = run_script(LAMBDA_AFTER)
    assert res.code == 1 and "zip() argument 2 is shorter" in res.err
    lead = res.findings[0]
    assert (lead["code"], lead["line"], lead["source"]) == ("GT533", 12, "static+runtime")
    assert any("(GT839)" in r["message"] and r["line"] == 18 for r in lead["related"]), lead


def test_scheduler_rebuilt_after_the_group_runs_clean(run_script):
    res = run_script(LAMBDA_REBUILT_OK)
    assert res.code == 0, res.err
    assert res.codes() == []


def test_ema_reading_only_itself_is_reported_by_run(run_script):
    res = run_script(EMA_SELF)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT457", 13)]


def test_ema_reading_the_model_runs_clean(run_script):
    res = run_script(EMA_OK)
    assert res.code == 0, res.err
    assert res.codes() == []


def test_ddp_reducer_error_is_explained_by_the_dropped_output():
    """GT880 (DDP's reducer waited for parameters) in the file that holds GT459: GT459's line
    (the loss that leaves the output out) leads, confirmed."""
    static = [Finding("GT459", "ddp-output-left-out-of-loss", "m", "/x/train.py", 49, 9)]
    runtime = [Finding("GT880", "ddp-unused-parameters", "r", "/x/train.py", 43, 1)]
    out = fuse.fuse(runtime, static, {"/x/train.py": [(1, 60)]})
    assert (out[0].code, out[0].line, out[0].source) == ("GT459", 49, "static+runtime")


def test_general_crash_is_not_matched_to_an_unrelated_related_line():
    """Only a related entry that says the line raises ties a general crash to a finding."""
    rel = (Related("/x/t.py", 19, "the scheduler is built here"),)
    static = [Finding("GT533", "param-group-added-after-scheduler", "m", "/x/t.py", 13, 9,
                      related=rel)]
    runtime = [Finding(fuse.GENERAL_CRASH, "crash", "r", "/x/t.py", 19, 1)]
    out = fuse.fuse(runtime, static, {"/x/t.py": [(1, 40)]}, crash_line=("/x/t.py", 19))
    assert out[0].code == fuse.GENERAL_CRASH


def test_ddp_ready_twice_is_explained_by_the_reentrant_checkpoint():
    """GT882 (a parameter marked ready twice) in the file that holds GT460: the checkpoint's line
    leads, confirmed."""
    static = [Finding("GT460", "reentrant-checkpoint-under-ddp", "m", "/x/net.py", 37, 21)]
    runtime = [Finding("GT882", "ddp-parameter-ready-twice", "r", "/x/net.py", 62, 5)]
    out = fuse.fuse(runtime, static, {"/x/net.py": [(1, 80)]})
    assert (out[0].code, out[0].line, out[0].source) == ("GT460", 37, "static+runtime")


HOOK_BYPASSED = """
import torch
import torch.nn as nn

net = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
norms = []
net.register_full_backward_hook(lambda m, gi, go: norms.append(go[0].norm()))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    net.forward(torch.randn(2, 3)).pow(2).mean().backward()
    opt.step()
"""


def test_hooked_module_run_through_forward_is_reported_by_run(run_script):
    res = run_script(HOOK_BYPASSED)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT711", 10)]


def test_hooked_module_called_runs_clean(run_script):
    res = run_script(HOOK_BYPASSED.replace("net.forward(", "net("))
    assert res.code == 0, res.err
    assert res.codes() == []
