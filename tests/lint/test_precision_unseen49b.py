"""Shapes from the projects of docs/triage/unseen49b.md (session 49), each in another spelling
than the project's, next to a buggy twin that is still reported; all run on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

SHAPES = {
    # GT405: one setting read from a dict by a constant key, compared with distinct constants
    # in separate `if`s: at most one optimizer receives the generator.
    "generator-per-optimizer-choice": (Shape("""
        cfg = {"optim": "sgd"}
        net = nn.Linear(3, 2)
        weights = net.parameters()
        if cfg["optim"] == "adam":
            opt = torch.optim.Adam(weights, lr=1e-3)
        if cfg["optim"] == "sgd":
            opt = torch.optim.SGD(weights, lr=1e-2)
        """, "GT405", holds="len(opt.param_groups[0]['params']) == 2"),
        Shape("""
        cfg = {"optim": "adam", "warm": "sgd"}
        net = nn.Linear(3, 2)
        weights = net.parameters()
        if cfg["optim"] == "adam":
            opt = torch.optim.Adam(weights, lr=1e-3)
        if cfg["warm"] == "sgd":
            opt = torch.optim.SGD(weights, lr=1e-2)
        """, "GT405", line=5, raises=(ValueError, "empty parameter list"))),
    # GT447: `net = self.train()` is the instance the optimizer is built over.
    "train-returns-the-module": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
            def forward(self, x):
                return self.fc(x)
            def fit(self, x, y):
                net = self.train()
                optim = torch.optim.SGD(self.parameters(), lr=0.1)
                for _ in range(2):
                    optim.zero_grad()
                    F.mse_loss(net(x), y).backward()
                    optim.step()
        m = Net()
        before = m.fc.weight.detach().clone()
        m.fit(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT447", holds="not torch.equal(before, m.fc.weight)"),
        Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
            def forward(self, x):
                return self.fc(x)
            def fit(self, x, y):
                net = Net().train()
                optim = torch.optim.SGD(self.parameters(), lr=0.1)
                for _ in range(2):
                    optim.zero_grad()
                    F.mse_loss(net(x), y).backward()
                    optim.step()
        m = Net()
        before = m.fc.weight.detach().clone()
        m.fit(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT447", line=9, holds="torch.equal(before, m.fc.weight)")),
    # GT531: the method that builds the plateau under `kind == 'plateau'` keeps `kind` on
    # self; the bare step() runs in the `else` of that field's test.
    "scheduler-kind-kept-on-self": (Shape("""
        class Runner:
            def __init__(self, net):
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
            def make_schedule(self, kind):
                if kind == 'plateau':
                    self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt)
                else:
                    self.sched = torch.optim.lr_scheduler.StepLR(self.opt, 2)
                self.kind = kind
            def end_epoch(self, val_loss):
                if self.kind == 'plateau':
                    self.sched.step(val_loss)
                else:
                    self.sched.step()
        r = Runner(nn.Linear(2, 1))
        r.make_schedule('plateau')
        r.end_epoch(1.0)
        r.make_schedule('step')
        r.end_epoch(1.0)
        """, "GT531"),
        Shape("""
        class Runner:
            def __init__(self, net):
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
            def make_schedule(self, kind):
                if kind == 'plateau':
                    self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt)
                else:
                    self.sched = torch.optim.lr_scheduler.StepLR(self.opt, 2)
                self.kind = 'fixed'
            def end_epoch(self, val_loss):
                if self.kind == 'plateau':
                    self.sched.step(val_loss)
                else:
                    self.sched.step()
        r = Runner(nn.Linear(2, 1))
        r.make_schedule('plateau')
        r.end_epoch(1.0)
        """, "GT531", line=14, raises=(TypeError, "metrics"))),
    # GT103: every binding of the returned name is a NumPy value (or updates one in place):
    # the caller gets an array of per-item losses, nothing to backpropagate.
    "numpy-losses-returned": (Shape("""
        net = nn.Linear(3, 1)
        def get_losses(x, y, n_samples=0):
            if n_samples == 0:
                loss = (net(x) - y).pow(2).sum(1)
                losses = loss.to("cpu").detach().numpy()
            else:
                loss = (net(x) - y).pow(2).sum(1)
                losses = loss.to("cpu").detach().numpy()
                for _ in range(1, n_samples):
                    losses += (net(x) - y).pow(2).sum(1).detach().numpy()
                losses /= np.float32(n_samples)
            return losses
        """, "GT103", holds="isinstance(get_losses(torch.randn(4, 3), torch.randn(4, 1), 2), "
                            "np.ndarray)"),
        Shape("""
        net = nn.Linear(3, 1)
        def get_losses(x, y, n_samples=0):
            if n_samples == 0:
                loss = (net(x) - y).pow(2).sum(1)
                losses = loss.to("cpu").detach().numpy()
            else:
                loss = (net(x) - y).pow(2).sum(1)
                losses = loss.to("cpu").detach().numpy()
                for _ in range(1, n_samples):
                    losses += (net(x) - y).pow(2).sum(1).detach().numpy()
                losses /= np.float32(n_samples)
            return torch.tensor(losses).mean()
        get_losses(torch.randn(4, 3), torch.randn(4, 1)).backward()
        """, "GT103", line=5, raises=(RuntimeError, "does not require grad"))),
    # GT799: a norm of the whole tensor is 0 only when every element is 0, not when a row is.
    "whole-tensor-norm": (Shape("""
        enc = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        def encode(x):
            o = enc(x)
            return o / torch.norm(o, p=2)
        x = torch.randn(8, 3)
        x[0] = 0.0
        with torch.no_grad():
            enc[0].bias.fill_(-0.01)
        out = encode(x)
        out.sum().backward()
        """, "GT799", holds="not torch.isnan(out).any()"),
        Shape("""
        enc = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        def encode(x):
            o = enc(x)
            return o / torch.norm(o, p=2, dim=1, keepdim=True)
        x = torch.randn(8, 3)
        x[0] = 0.0
        with torch.no_grad():
            enc[0].bias.fill_(-0.01)
        out = encode(x)
        out.sum().backward()
        """, "GT799", line=4, holds="torch.isnan(out[0]).all()")),
    # GT402: plain requires-grad tensors of a module handed by name to the optimizer.
    "instance-tensors-in-optimizer": (Shape("""
        class Plastic(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.randn(3, 3, requires_grad=True)
                self.eta = torch.ones(1, requires_grad=True)
            def forward(self, x):
                return x @ self.w * self.eta
        net = Plastic()
        opt = torch.optim.Adam([net.w, net.eta], lr=0.1)
        before = net.w.detach().clone()
        net(torch.randn(2, 3)).sum().backward()
        opt.step()
        """, "GT402", holds="not torch.equal(before, net.w)"),
        Shape("""
        class Plastic(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.randn(3, 3, requires_grad=True)
                self.eta = torch.ones(1, requires_grad=True)
            def forward(self, x):
                return x @ self.w * self.eta
        net = Plastic()
        opt = torch.optim.Adam([net.w], lr=0.1)
        before = net.eta.detach().clone()
        net(torch.randn(2, 3)).sum().backward()
        opt.step()
        """, "GT402", line=5, holds="torch.equal(before, net.eta)")),
}

GAN = """
class Trainer:
    def __init__(self):
        self.gen, self.disc, self.g_optim, self.d_optim = self._load()
    def _load(self):
        gen, disc = nn.Linear(2, 2), nn.Linear(2, 1)
        g_optim = torch.optim.SGD(gen.parameters(), lr=0.1)
        d_optim = torch.optim.SGD({over}.parameters(), lr=0.1)
        return gen, disc, g_optim, d_optim
    def train(self, steps, reg_every):
        for step in range(steps):
            x = torch.randn(4, 2)
            self.disc.zero_grad()
            F.softplus(self.disc(self.gen(x).detach())).mean().backward()
            self.d_optim.step()
            if step % reg_every == 0:
                self.disc.zero_grad()
                self.disc(x).pow(2).mean().backward()
                self.d_optim.step()
Trainer().train(3, 2)
"""


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


@pytest.mark.parametrize("over,line", [("disc", None), ("gen", 14)],
                         ids=["lazy-regulariser-of-unpacked-fields", "other-module"])
def test_periodic_update_of_unpacked_fields(over: str, line: int | None) -> None:
    """GT519: `self.d_optim` and `self.disc` unpacked from `_load`'s tuple, whose `d_optim` is
    built over `disc`: the branch clears and backpropagates its own loss (StyleGAN2's lazy R1
    step). Twin: `d_optim` is built over the generator, so the branch's clear of `disc` does
    not clear what it steps."""
    judge(PRELUDE, Shape(GAN.format(over=over), "GT519", line=line))
