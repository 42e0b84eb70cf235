"""Held-out batch 43 (docs/triage/ho49.md) at run time, real torch, in other spellings than
the cases':

- An optimizer whose parameters got gradients from the first loss of a round only, while later
  losses of the round use another part of the model, is idle at those steps but nothing
  replaced its tensors: they are still a live module's registered parameters, so no GT849
  (NOTE [replaced under the optimizer]). The twin re-makes a plain tensor the optimizer holds:
  GT849 at the line that re-made it.
- A soft target not detached whose network's gradients are cleared (``module.zero_grad()``)
  after the distillation loss's backward() and before that network's own step: the
  distillation gradient is never applied, no GT878 (NOTE [soft target not detached]). The twin
  does not clear them: GT878 at the softmax.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

ROUNDS = """
import torch
import torch.nn as nn
torch.manual_seed(0)

class Coder:
    def __init__(self):
        self.enc = nn.Linear(5, 4)
        self.dec = nn.Linear(4, 5)
        self.w_out = torch.randn(4, 5).requires_grad_()
        held = self.dec.parameters() if "{how}" == "module" else [self.w_out]
        self.opts = [torch.optim.SGD(self.enc.parameters(), lr=0.05),
                     torch.optim.SGD(held, lr=0.05)]

    def decode(self, h):
        return self.dec(h) if "{how}" == "module" else h @ self.w_out

    def update(self, loss):
        for o in self.opts:
            o.zero_grad()
        loss.backward()
        for o in self.opts:
            o.step()

    def rebuild(self):
        self.w_out = self.w_out.detach().clone().requires_grad_()

    def round(self, x, pairs):
        self.update((self.decode(self.enc(x)) - x).pow(2).mean())
        if "{how}" == "tensor":
            self.rebuild()
        for a, b in pairs:
            loss = (self.enc(a) - self.enc(b)).pow(2).mean()
            if "{how}" == "tensor":
                loss = loss + self.decode(self.enc(a)).pow(2).mean()
            self.update(loss)

model = Coder()
model.round(torch.randn(6, 5), [(torch.randn(3, 5), torch.randn(3, 5)) for _ in range(3)])
"""


@pytest.mark.parametrize("how,expect", [("module", []), ("tensor", [("GT849", 25)])])
def test_idle_optimizer_over_registered_parameters(run_script, how, expect) -> None:
    res = run_script(ROUNDS.replace("{how}", how))
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings] == expect, res.err


DISTIL = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)

big = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
small = nn.Linear(6, 3)
opt_big = torch.optim.Adam(big.parameters(), lr=1e-2)
opt_small = torch.optim.Adam(small.parameters(), lr=1e-2)
for it in range(5):
    x, y = torch.randn(12, 6), torch.randint(0, 3, (12,))
    opt_small.zero_grad()
    distil = F.kl_div(F.log_softmax(small(x), -1), F.softmax(big(x), -1),
                      reduction="batchmean")
    distil.backward()
    opt_small.step()
    if {clear}:
        big.zero_grad()
    F.cross_entropy(big(x), y).backward()
    opt_big.step()
"""


@pytest.mark.parametrize("clear,expect", [("True", []), ("False", [("GT878", 13)])])
def test_soft_target_whose_network_is_cleared_before_its_step(run_script, clear,
                                                              expect) -> None:
    res = run_script(DISTIL.replace("{clear}", clear))
    assert res.code == 0, res.err
    got = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT878"]
    assert got == expect, res.err
    if clear == "True":
        assert res.findings == [], res.err
