"""Session 29, the lead: NOTE [closure evaluations summed] (runtime/trace/closure_sum.py).

LBFGS calls its closure several times per step and reads ``.grad`` after each call; a closure
that does not clear the gradients first makes the evaluations add up. Real torch (checked in
each bug below): the gradient LBFGS reads at the second evaluation is the sum of two, so the
fit differs from the cleared one. The run names the clearing after the step (in the function
that stepped), or the closure's backward() when nothing clears. Also: the parameters of an LBFGS
run whose gradients are cleared after the step did receive gradients (no "never received").
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
X, Y = torch.randn(64, 5), torch.randn(64, 1)
"""

BUGS = {
    # the clearing after step(), in the loop that steps
    "cleared_after_step": """
net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=5)
for epoch in range(3):
    def closure():
        loss = F.mse_loss(net(X), Y)
        loss.backward()
        return loss
    opt.step(closure)
    opt.zero_grad()  # <- cause
""",
    # a trainer method: the closure calls another method that backpropagates; the clearing
    # sets the gradients to None after the step
    "method_closure_cleared_after_step": """
class Trainer:
    def __init__(self):
        self.net = nn.Linear(5, 1)
        self.opt = torch.optim.LBFGS(self.net.parameters(), max_iter=4)

    def single(self, x, y):
        loss = F.mse_loss(self.net(x), y)
        loss.backward()
        return loss

    def step(self, x, y):
        self.opt.step(lambda: self.single(x, y))
        for p in self.net.parameters():
            p.grad = None  # <- cause


t = Trainer()
for _ in range(2):
    t.step(X, Y)
""",
    # nothing clears at all: the closure's backward() is named
    "never_cleared": """
net = nn.Linear(5, 1)
opt = torch.optim.LBFGS(net.parameters(), max_iter=4)


def closure():
    loss = ((net(X) - Y) ** 2).mean()
    loss.backward()  # <- cause
    return loss


for _ in range(2):
    opt.step(closure)
""",
}

LOOKALIKES = {
    # the closure clears first
    "cleared_in_closure": """
net = nn.Linear(5, 1)
opt = torch.optim.LBFGS(net.parameters(), max_iter=5)
for _ in range(2):
    def closure():
        opt.zero_grad()
        loss = F.mse_loss(net(X), Y)
        loss.backward()
        return loss
    opt.step(closure)
""",
    # full-batch LBFGS over micro-batches: cleared once, then one backward() line run per chunk
    "micro_batches_in_one_evaluation": """
net = nn.Linear(5, 1)
opt = torch.optim.LBFGS(net.parameters(), max_iter=3)


def closure():
    opt.zero_grad()
    total = 0.0
    for xb, yb in zip(X.split(16), Y.split(16)):
        loss = F.mse_loss(net(xb), yb) / 4
        loss.backward()
        total += loss.item()
    return torch.tensor(total)


for _ in range(2):
    opt.step(closure)
""",
    # SGD evaluates its closure once: two backward() calls in it are one evaluation
    "sgd_closure_two_backwards": """
net = nn.Linear(5, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(3):
    opt.zero_grad()

    def closure():
        for xb, yb in zip(X.split(32), Y.split(32)):
            F.mse_loss(net(xb), yb).backward()
        return torch.tensor(0.0)
    opt.step(closure)
""",
}


def _run_findings(res):
    return [f for f in res.findings if f["source"] != "static"]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_summed_closure_evaluations_name_the_clearing(run_script, name):
    src = HEAD + BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert first["line"] == marked_line(src), res.findings
    assert first["code"] == "GT891" or any("GT891" in r["message"] for r in first["related"]), \
        first
    assert not any("never received a gradient" in f["message"] for f in res.findings), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_cleared_or_single_evaluation_closures_are_silent(run_script, name):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert not _run_findings(res), res.findings


REAL = """
import torch

torch.manual_seed(0)
x, y = torch.randn(16, 3), torch.randn(16, 1)
w = torch.zeros(3, 1, requires_grad=True)
fresh, read = [], []


def evaluate():
    loss = ((x @ w - y) ** 2).mean()
    fresh.append(torch.autograd.grad(loss, w, retain_graph=True)[0])
    loss.backward()
    read.append(w.grad.clone())
    return loss


torch.optim.LBFGS([w], max_iter=3).step(evaluate)
"""


def test_summed_evaluations_change_what_lbfgs_reads():
    """Real torch: without clearing, the .grad LBFGS reads after an evaluation is the sum of
    that evaluation's gradient and the earlier ones' (run from a string: this file is not a
    program the tests trace)."""
    import torch

    env: dict = {}
    exec(compile(REAL, "lbfgs_sum.py", "exec"), env)
    fresh, read = env["fresh"], env["read"]
    assert len(read) >= 2
    assert torch.allclose(read[1], fresh[0] + fresh[1])
    assert not torch.allclose(read[1], fresh[1])


# ---- GT206 named at the create_graph keyword of a multi-line autograd.grad call -------------

FORCE_BUG = """
net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
pos, f_true = torch.randn(6, 3), torch.randn(6, 3)
for _ in range(3):
    p = pos.clone().requires_grad_(True)
    energy = net(p).sum()
    forces = -torch.autograd.grad(
        energy,
        p,
        create_graph=False,  # <- cause
        retain_graph=True,
    )[0]
    loss = 0.01 * energy ** 2 + ((forces - f_true) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_force_from_grad_without_graph_names_the_keyword_line(run_script):
    src = HEAD + FORCE_BUG
    res = run_script(src)
    assert res.code == 0, res.err
    f = next(f for f in res.findings if f["source"] != "static")
    assert (f["code"], f["line"]) == ("GT206", marked_line(src)), res.findings


def test_force_from_grad_with_graph_is_silent(run_script):
    res = run_script(HEAD + FORCE_BUG.replace("create_graph=False,  # <- cause",
                                              "create_graph=True,"))
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["source"] != "static"], res.findings
