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
        {cleared}.zero_grad()
    d_loss = disc(gen(z).detach()).mean() - disc(real).mean()
    d_loss.backward()
    if "{how}" == "stepped":
        opt_d.step()
    opt_g.zero_grad()
    g_loss = -disc(gen(z)).mean()
    g_loss.backward()
    opt_g.step()
"""


@pytest.mark.parametrize("how", ["missing", "stepped", "never_cleared", "model_cleared"])
def test_optimizer_cleared_never_stepped(run_script, how: str) -> None:
    """model_cleared: `disc.zero_grad()` clears the tensors of an optimizer never used (kept
    for a later phase): not its own clear, no GT869."""
    cleared = "disc" if how == "model_cleared" else "opt_d"
    res = run_script(TWO.replace("{how}", how).replace("{cleared}", cleared))
    assert res.code == 0, res.err
    got = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT869"]
    if how == "missing":  # the discriminator's backward(), where its step belongs
        assert got == [("GT869", 14)], res.err
    else:
        assert got == [], res.err


DDP_FREEZE = """
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

class Backbone(nn.Module):
    def __init__(self, frozen, where):
        super().__init__()
        self.frozen, self.where = frozen, where
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        {init}

    def freeze(self):
        for block in self.blocks[:self.frozen]:
            block.requires_grad_(False)

    def train(self, mode=True):
        super().train(mode)
        {train}
        return self

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        return x

def run(where):
    torch.manual_seed(0)
    model = DistributedDataParallel(Backbone(1, where))
    model.train()
    if where == "none":
        model.module.freeze()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(3, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.fixture
def one_rank_group(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("no gloo backend")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


VARIANTS = {"train": ("pass", "self.freeze()"), "none": ("pass", "pass"),
            "init": ("self.freeze()", "self.freeze()")}


@pytest.mark.parametrize("where,line", [("train", 11), ("none", 15), ("init", None)])
def test_freeze_applied_by_train_override(tmp_path, one_rank_group, where: str,
                                          line: int | None) -> None:
    """train: the freeze only in the `train()` override, run after the wrap (the twin, named
    at the end of `__init__`); none: frozen by the caller after the wrap (the freeze line,
    as before); init: the constructor freezes too (the look-alike, clean)."""
    import runpy

    import gradtrace
    from gradtrace.runtime.distributed.ranks import rank_session

    path = tmp_path / "prog.py"
    init, train = VARIANTS[where]
    path.write_text(DDP_FREEZE.replace("{init}", init).replace("{train}", train),
                    encoding="utf-8")
    run = runpy.run_path(str(path))["run"]
    found, error = [], ""
    with gradtrace.trace() as tr, rank_session(tr, check_sync=0) as rs:
        try:
            run(where)
        except RuntimeError as exc:
            error = str(exc)
            found = rs.diagnose(exc)
    if line is None:
        assert error == "" and not [f for f in tr.findings if f.code == "GT880"]
    else:
        assert "finished reduction" in error
        assert [(f.code, f.line) for f in found] == [("GT880", line)], found
