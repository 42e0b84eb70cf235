"""Readings of docs/triage/static24c.md, written from each mechanism's sentence rather than from
the case it came from: a buggy twin that real torch shows wrong (the checker names its line) and
a correct look-alike of the same shape that runs (the checker stays silent)."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore")
'''

# (silent look-alike, buggy twin)
SHAPES = {
    # GT708 widened: a state container's detach() drops each member's `.detach()`; the
    # look-alike rebinds the members (and another class's in-place detach() is called alone)
    "state-members-detach-dropped": (Shape("""
        class Carry:
            def __init__(self, h, c):
                self.h, self.c = h, c
            def members(self):
                return [self.h, self.c]
            def detach(self):
                self.h, self.c = (t.detach() for t in self.members())
        rnn = nn.LSTMCell(3, 4)
        st = Carry(*rnn(torch.randn(2, 3)))
        for s in [st]:
            s.detach()
        """, "GT708", holds="st.h.grad_fn is None"), Shape("""
        class Carry:
            def __init__(self, h, c):
                self.h, self.c = h, c
            def members(self):
                return [self.h, self.c]
            def detach(self):
                for t in self.members():
                    t.detach()
        rnn = nn.LSTMCell(3, 4)
        st = Carry(*rnn(torch.randn(2, 3)))
        st.detach()
        """, "GT708", 8, holds="st.h.grad_fn is not None")),
    # GT302 widened: a result tensor flagged requires_grad before it is filled element by
    # element is reported at the flag; the look-alike fills first and flags afterwards
    "result-flagged-before-fill": (Shape("""
        a = torch.randn(3, 4, requires_grad=True)
        table = torch.zeros(3, 3)
        for i in range(3):
            for j in range(3):
                table[i][j] = a[i].sum() * j
        table.requires_grad_(True)
        ok = table.sum()
        """, "GT302", holds="ok.requires_grad"), Shape("""
        a = torch.randn(3, 4, requires_grad=True)
        table = torch.zeros(3, 3).requires_grad_(True)
        for i in range(3):
            for j in range(3):
                table[i][j] = a[i].sum() * j
        """, "GT302", 2, raises=(RuntimeError, "leaf Variable that requires grad"))),
    # the flag set inside another assignment (a config object keeps the tensor); the
    # look-alike is a weight the loop trains: its `.grad` is read, the write is reported
    "flag-stored-on-config-then-filled": (Shape("""
        from types import SimpleNamespace
        def build(cfg, n):
            m = torch.zeros(n, n)
            for i in range(n - 1):
                m[i, i + 1] = 1.0
            cfg.adj = m.requires_grad_(True)
        cfg = SimpleNamespace()
        build(cfg, 4)
        """, "GT302", holds="cfg.adj.requires_grad"), Shape("""
        from types import SimpleNamespace
        def build(cfg, n):
            m = torch.zeros(n, n)
            cfg.adj = m.requires_grad_(True)
            for i in range(n - 1):
                m[i, i + 1] = 1.0
        cfg = SimpleNamespace()
        build(cfg, 4)
        """, "GT302", 4, raises=(RuntimeError, "leaf Variable that requires grad"))),
    "trained-weight-written-in-place": (Shape("""
        w = torch.zeros(4, requires_grad=True)
        (w * 2).sum().backward()
        with torch.no_grad():
            w[0] = w[0] - 0.1 * w.grad[0]
        """, "GT302", holds="w.is_leaf"), Shape("""
        w = torch.zeros(4, requires_grad=True)
        (w * 2).sum().backward()
        w[0] = w[0] - 0.1 * w.grad[0]
        """, "GT302", 3, raises=(RuntimeError, "leaf Variable that requires grad"))),
    # GT119: a loss term re-made a leaf that requires grad, as an operand; the look-alike
    # makes the leaf for an input-gradient probe and reads its gradient
    "releafed-operand-in-loss": (Shape("""
        enc = nn.Linear(4, 3)
        x = torch.randn(5, 4)
        h = enc(x)
        probe = h[0].detach().clone().requires_grad_(True)
        (probe * h[1]).sum().backward()
        """, "GT119", holds="probe.grad is not None and enc.weight.grad is not None"), Shape("""
        enc = nn.Linear(4, 3)
        x = torch.randn(5, 4)
        h = enc(x)
        loss = 0
        for i in range(4):
            loss = loss - torch.dot(h[i], h[i + 1]).detach().clone().requires_grad_(True)
        loss.backward()
        """, "GT119", 6, holds="enc.weight.grad is None")),
    # a helper's result: the look-alike's caller asks for the leaf's gradient
    "releafed-helper-result": (Shape("""
        def as_leaf(t):
            return torch.tensor(t.detach().float(), requires_grad=True)
        net = nn.Linear(4, 1)
        inp = as_leaf(torch.randn(2, 4))
        net(inp).sum().backward()
        saliency = inp.grad.abs()
        """, "GT119", holds="saliency.shape == (2, 4)"), Shape("""
        def hard_mask(p, t):
            return torch.tensor((p > t).float(), requires_grad=True)
        def dice(p, y):
            m = hard_mask(p, 0.5)
            return 1 - 2 * (m * y).sum() / (m.sum() + y.sum() + 1)
        net = nn.Linear(4, 1)
        dice(torch.sigmoid(net(torch.randn(8, 4))), torch.ones(8, 1)).backward()
        """, "GT119", 2, holds="net.weight.grad is None")),
    # GT306 widened: an attribute set to arithmetic on a tensor flagged right there, given to
    # an optimizer in another method; the look-alike scales before flagging
    "scaled-attribute-given-to-optimizer": (Shape("""
        class SysId:
            def __init__(self):
                self.true = torch.tensor([10.0, 1.0, 1.0])
                self.guess = (self.true.clone() * 1.2).requires_grad_()
            def optimizer(self):
                return torch.optim.RMSprop([{"params": self.guess, "lr": 1e-2}])
        opt = SysId().optimizer()
        """, "GT306", holds="len(opt.param_groups) == 1"), Shape("""
        class SysId:
            def __init__(self):
                self.true = torch.tensor([10.0, 1.0, 1.0])
                self.guess = (self.true.clone().requires_grad_() * 1.2)
            def optimizer(self):
                return torch.optim.RMSprop([{"params": self.guess, "lr": 1e-2}])
        opt = SysId().optimizer()
        """, "GT306", 4, raises=(ValueError, "can't optimize a non-leaf Tensor"))),
    # GT203 widened: a module's forward turns grad on for an inner gradient and then off
    # instead of restoring it; the script trains after running it. Look-alike: restores
    "forward-leaves-grad-off": (Shape("""
        class Den(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 4)
            def energy_grad(self, x):
                prev = torch.is_grad_enabled()
                torch.set_grad_enabled(True)
                x = x.requires_grad_()
                g, = torch.autograd.grad(self.net(x).sum(), x)
                torch.set_grad_enabled(prev)
                return g
            def forward(self, x):
                return x - self.energy_grad(x)
        den = Den()
        clean = den(torch.randn(2, 4)).detach()
        head = nn.Linear(4, 4)
        head(clean).pow(2).mean().backward()
        """, "GT203", holds="head.weight.grad is not None"), Shape("""
        class Den(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 4)
            def energy_grad(self, x):
                torch.set_grad_enabled(True)
                x = x.requires_grad_()
                g, = torch.autograd.grad(self.net(x).sum(), x)
                torch.set_grad_enabled(False)
                return g
            def forward(self, x):
                return x - self.energy_grad(x)
        den = Den()
        clean = den(torch.randn(2, 4)).detach()
        head = nn.Linear(4, 4)
        head(clean).pow(2).mean().backward()
        """, "GT203", 9, raises=(RuntimeError, "does not require grad"))),
}


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """A twin that leaves grad off (GT203) must not leak into the next test."""
    yield
    torch.set_grad_enabled(True)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
