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


# NOTE [module state chains the graphs of its calls] (GT826 kind graph-kept, shown as GT505)
RUNNING = """
import torch
import torch.nn as nn

class RunningCenter(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("center", torch.zeros(dim))

    def forward(self, x):
        UPDATE
        return x - self.center

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.center = RunningCenter(4)

    def forward(self, x):
        return self.center(self.enc(x))

torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(8):
    out = net(torch.randn(16, 4))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
print("done")
"""
CHAINED = RUNNING.replace("UPDATE", "self.center.mul_(0.9).add_(0.1 * x.mean(0))  # <- cause")
DETACHED = RUNNING.replace("UPDATE", "self.center.mul_(0.9).add_(0.1 * x.detach().mean(0))")
REBOUND = RUNNING.replace("UPDATE", "self.last = x.mean(0)")

BANK = """
import torch
import torch.nn as nn

class Bank(nn.Module):
    def __init__(self):
        super().__init__()
        self.keys = torch.zeros(8, 4)
        self.ptr = 0
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        k = self.proj(x)
        self.keys[self.ptr:self.ptr + 2] = k  # <- cause
        self.ptr = (self.ptr + 2) % 8
        return (k @ self.keys.t()).logsumexp(-1).mean()

torch.manual_seed(0)
bank = Bank()
opt = torch.optim.SGD(bank.parameters(), lr=0.01)
for step in range(6):
    loss = bank(torch.randn(2, 4))
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
print("done")
"""


@pytest.mark.parametrize("src", [CHAINED, BANK], ids=["running-buffer", "memory-bank"])
def test_state_written_in_place_with_a_graph_named_at_the_write(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == [("GT505", marked_line(src))], \
        res.findings


@pytest.mark.parametrize("src", [DETACHED, REBOUND], ids=["detached", "rebound"])
def test_state_written_without_a_graph_or_rebound_is_silent(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT505" not in res.codes() and "GT826" not in res.codes(), res.findings


EPISODIC = """
import torch
import torch.nn as nn

class Memory(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 4)
        self.reset()

    def reset(self):
        self.mem = torch.zeros(5, 4)

    def forward(self, x, t):
        h = torch.tanh(self.cell(x))
        self.mem[t] = h
        return self.mem.sum(0)

torch.manual_seed(0)
memory = Memory()
opt = torch.optim.SGD(memory.parameters(), lr=0.01)
for episode in range(3):
    memory.reset()
    out = sum(memory(torch.randn(4), t) for t in range(5))
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
"""


def test_memory_made_again_for_each_episode_is_silent(run_script):
    # written in place through one episode (its graph is that episode's computation), made
    # again for the next: no chain across backward() calls
    res = run_script(EPISODIC)
    assert res.code == 0, res.err
    assert "GT505" not in res.codes() and "GT826" not in res.codes(), res.findings
