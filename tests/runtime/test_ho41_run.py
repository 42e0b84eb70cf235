"""Held-out batch 41 (docs/triage/ho41.md) at run time, real torch, in other spellings than
the cases':

- A parameter read by the very statement that detaches a statistic computed from it and from
  a value made elsewhere (a distance gate) is the program's choice: no "never received a
  gradient" finding (NOTE [parameter read where it is detached]). The buggy twins keep
  theirs: a module's output detached in another statement, a module called in the detaching
  statement (no parameter read there), a parameter detached alone.
- An optimizer whose gradients are cleared pass after pass and never stepped while another
  optimizer steps is GT869 on the backward() after its clearing line
  (NOTE [optimizer cleared, never stepped]); the look-alikes step it, or never clear it.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

GATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)

class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.heads = nn.ModuleList(nn.Linear(8, 1) for _ in range(2))
        self.centers = torch.randn(2, 8)
        if "{how}" == "plain":
            self.w = nn.Parameter(torch.ones(8))
        elif "{how}" == "module":
            self.w = nn.Linear(8, 8)
        else:
            self.w = nn.ParameterDict({k: nn.Parameter(torch.randn(8, 3)) for k in "ab"})

    def score(self, h, k, i):
        diff = h - self.centers[i]
        if "{how}" == "same":
            return (diff @ self.w[k]).pow(2).sum(1).detach()
        if "{how}" == "plain":
            return (diff * self.w).pow(2).sum(1).detach()
        if "{how}" == "apart":
            dist = (diff @ self.w[k]).pow(2).sum(1)
            return dist.detach()
        if "{how}" == "module":
            return self.w(diff).pow(2).sum(1).detach()
        return (diff @ self.w[k].t().detach().t()).pow(2).sum(1)

    def forward(self, x):
        h = self.enc(x)
        d = torch.stack([-self.score(h, k, i) for i, k in enumerate("ab")], 1)
        out = torch.cat([head(h) for head in self.heads], 1)
        return (F.softmax(d, 1) * out).sum(1)

model = Gated()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(16, 6)
    loss = (model(x) - x[:, 0]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

NEVER = "never received a gradient"


@pytest.mark.parametrize("how,line", [("same", None), ("plain", None), ("apart", 27),
                                      ("module", 29), ("alone", 30)])
def test_parameter_read_where_detached(run_script, how: str, line: int | None) -> None:
    res = run_script(GATE.replace("{how}", how))
    assert res.code == 0, res.err
    got = [(f["code"], f["line"]) for f in res.findings if NEVER in f["message"]]
    if how == "same":  # the look-alike: the gate's own statement reads the parameters
        assert res.findings == [], res.err
    elif how == "plain":  # (the static GT115, read on the code that ran, still names it)
        assert got == [], res.err
    else:  # the twins: the cut is reported where it is made
        assert got[:1] == [("GT107", line)], res.err


TWO = """
import torch
import torch.nn as nn
torch.manual_seed(0)

gen, disc = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
before = [p.detach().clone() for p in disc.parameters()]
for step in range(12):
    real, z = torch.randn(8, 4) + 2, torch.randn(8, 4)
    if "{how}" != "never_cleared":
        opt_d.zero_grad()
    d_loss = disc(gen(z).detach()).mean() - disc(real).mean()
    d_loss.backward()
    if "{how}" == "stepped":
        opt_d.step()
    opt_g.zero_grad()
    g_loss = -disc(gen(z)).mean()
    g_loss.backward()
    opt_g.step()
"""


@pytest.mark.parametrize("how", ["missing", "stepped", "never_cleared"])
def test_optimizer_cleared_never_stepped(run_script, how: str) -> None:
    res = run_script(TWO.replace("{how}", how))
    assert res.code == 0, res.err
    got = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT869"]
    if how == "missing":  # the discriminator's backward(), where its step belongs
        assert got == [("GT869", 14)], res.err
    else:
        assert got == [], res.err
