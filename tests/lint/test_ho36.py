"""The facts widened for held-out batch 36 (docs/triage/ho36.md), each as a buggy twin that is
reported on its line and a silent look-alike, in other spellings than the cases'. Every snippet
runs on real torch, and ``holds`` / ``raises`` check what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT401: a layer bound once to a local as `nn.X(...).to(device)` (`Module.to` returns the
    # module itself) and appended to a plain list is as unregistered as the bare layer; the
    # look-alike moves layers that own no parameter
    "moved-layer-appended-to-plain-list": (Shape("""
        class Towers(nn.Module):
            def __init__(self, widths, device="cpu"):
                super().__init__()
                self.towers = []
                for w in widths:
                    tower = nn.Linear(3, w).to(device)
                    self.towers.append(tower)
            def forward(self, x):
                return [t(x) for t in self.towers]
        net = Towers([2, 5])
        """, "GT401", line=4, holds="len(list(net.parameters())) == 0"), Shape("""
        class Towers(nn.Module):
            def __init__(self, rates, device="cpu"):
                super().__init__()
                self.drops = []
                for r in rates:
                    drop = nn.Dropout(r).to(device)
                    self.drops.append(drop)
            def forward(self, x):
                return [d(x) for d in self.drops]
        net = Towers([0.1, 0.2])
        """, "GT401", holds="len(net(torch.ones(2, 3))) == 2")),
    # GT503: the step a clearing erases runs in a method of the same class (`self.apply()`
    # steps `self.opt` in its own body): backward, clear, then the call; the look-alike
    # clears after the call
    "clear-before-a-method-that-steps": (Shape("""
        class Critic:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net.parameters(), lr=0.5)
            def learn(self, x, target):
                loss = F.mse_loss(self.net(x), target)
                loss.backward()
                self.opt.zero_grad()
                self.apply()
            def apply(self):
                nn.utils.clip_grad_norm_(self.net.parameters(), 5.0)
                self.opt.step()
        net = nn.Linear(3, 1)
        before = net.weight.detach().clone()
        Critic(net).learn(torch.randn(8, 3), torch.randn(8, 1))
        """, "GT503", line=8, holds="torch.equal(before, net.weight)"), Shape("""
        class Critic:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.SGD(net.parameters(), lr=0.5)
            def learn(self, x, target):
                loss = F.mse_loss(self.net(x), target)
                loss.backward()
                self.apply()
                self.opt.zero_grad()
            def apply(self):
                nn.utils.clip_grad_norm_(self.net.parameters(), 5.0)
                self.opt.step()
        net = nn.Linear(3, 1)
        before = net.weight.detach().clone()
        Critic(net).learn(torch.randn(8, 3), torch.randn(8, 1))
        """, "GT503", holds="not torch.equal(before, net.weight)")),
    # GT602: the name holds a view of the saved output (`.view(...)`, `.reshape(...)` of the
    # op's fresh result), so a write into it bumps the saved tensor's version; the look-alike
    # clones after the reshape
    "write-into-reshaped-saved-output": (Shape("""
        proj = nn.Linear(6, 8)
        x = torch.randn(3, 6)
        gates = torch.sigmoid(proj(x)).reshape(3, 2, 4)
        gates[:, 1] = 1.0
        gates.sum().backward()
        """, "GT602", line=4, raises=(RuntimeError, "modified by an inplace operation")), Shape("""
        proj = nn.Linear(6, 8)
        x = torch.randn(3, 6)
        gates = torch.sigmoid(proj(x)).reshape(3, 2, 4).clone()
        gates[:, 1] = 1.0
        gates.sum().backward()
        """, "GT602", holds="proj.weight.grad is not None")),
    # GT602: a local Sequential ending in a ReLU, trained by an optimizer, called on a plain
    # input: its output still has a graph (its Linear), and the ReLU saved it; the look-alike
    # freezes the block, so nothing is saved (NOTE [trained local module])
    "local-trained-block-output-written": (Shape("""
        block = nn.Sequential(nn.Linear(5, 6), nn.ReLU())
        head = nn.Linear(6, 1)
        sgd = torch.optim.SGD(list(block.parameters()) + list(head.parameters()), lr=0.1)
        feats = block(torch.randn(4, 5))
        feats[:, 0] = 0.0
        head(feats).sum().backward()
        """, "GT602", line=5, raises=(RuntimeError, "modified by an inplace operation")), Shape("""
        block = nn.Sequential(nn.Linear(5, 6), nn.ReLU())
        block.requires_grad_(False)
        head = nn.Linear(6, 1)
        sgd = torch.optim.SGD(head.parameters(), lr=0.1)
        feats = block(torch.randn(4, 5))
        feats[:, 0] = 0.0
        head(feats).sum().backward()
        """, "GT602", holds="head.weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
