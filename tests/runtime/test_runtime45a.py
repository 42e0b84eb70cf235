"""runtime45a on real torch, one process each, tiny models.

- NOTE [trained while switched on, built while switched off] (GT821, kind
  unfrozen-after-optimizer, shown as its static twin GT410): a program switches which head
  trains by flipping ``requires_grad`` and builds its optimizer from the ``requires_grad``
  filter while another head is switched on; the first head's gradients are never applied.
  Named at the line that lists the parameters. Look-alikes: the optimizer built from every
  head's parameters; a GAN that freezes its discriminator during the generator's step (the
  toggled parameters are held by their own optimizer).
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

SWITCHED = """
import torch
import torch.nn as nn

class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(6, 8)
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 1), "b": nn.Linear(8, 1)})
        self.trunk.requires_grad_(False)

    def switch_to(self, task):
        for name, head in self.heads.items():
            head.requires_grad_(name == task)

    def forward(self, x, task):
        return self.heads[task](torch.relu(self.trunk(x))).squeeze(-1)

def make_optimizer(model):
    trainable = LISTED
    return torch.optim.SGD(trainable, lr=0.05)

torch.manual_seed(0)
model = MultiTask()
opt = None
for it in range(6):
    for task in ("a", "b"):
        model.switch_to(task)
        x = torch.randn(16, 6)
        loss = (model(x, task) - x.sum(-1)).pow(2).mean()
        loss.backward()
    if opt is None:
        opt = make_optimizer(model)
    opt.step()
    opt.zero_grad()
print("done")
"""
BUG = SWITCHED.replace("LISTED", "[p for p in model.parameters() if p.requires_grad]"
                                 "  # <- cause")
FIXED = SWITCHED.replace("LISTED", "list(model.heads.parameters())")

GAN = """
import torch
import torch.nn as nn

torch.manual_seed(0)
G, D = nn.Linear(4, 4), nn.Linear(4, 1)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
for it in range(5):
    real = torch.randn(8, 4)
    fake = G(torch.randn(8, 4))
    D.requires_grad_(True)
    d_loss = D(fake.detach()).mean() - D(real).mean()
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    D.requires_grad_(False)
    g_loss = -D(fake).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
print("done")
"""


def test_optimizer_from_the_filter_of_the_moment_named_at_the_list(run_script):
    res = run_script(BUG)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT410", marked_line(BUG))], \
        res.findings


def test_optimizer_over_every_head_is_silent(run_script):
    res = run_script(FIXED)
    assert res.code == 0, res.err
    assert not {"GT410", "GT821"} & set(res.codes()), res.findings


def test_discriminator_switched_off_for_the_generator_is_silent(run_script):
    res = run_script(GAN)
    assert res.code == 0, res.err
    assert not {"GT410", "GT821"} & set(res.codes()), res.findings
