"""Facts followed across functions and objects (issues 12, 13: helper "staticrecall").

- a helper that cuts what it returns, reached through another helper (NOTE [helper cuts]);
- a method the training loop calls on the model at every step, as `forward` is
  (NOTE [per-step methods]).

Each entry: a look-alike that must stay silent and run, and buggy twins in two or more
spellings reported on the given line; all run on real torch (tests/lint/shape_runner.py).
"""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT106 two helpers deep: the outer helper returns what the inner one rebuilt
    "helper-cut-two-calls-deep": (Shape("""
        def as_leaf(v):
            return torch.tensor(v.item(), requires_grad=True)
        def compute_loss(out, y):
            loss = F.mse_loss(out, y)
            logged = as_leaf(loss)
            return loss
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in [(torch.randn(4, 3), torch.randn(4, 1))]:
            loss = compute_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT10", holds="model.weight.grad is not None"), [Shape("""
        def as_leaf(v):
            return torch.tensor(v.item(), requires_grad=True)
        def compute_loss(out, y):
            return as_leaf(F.mse_loss(out, y))
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in [(torch.randn(4, 3), torch.randn(4, 1))]:
            loss = compute_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT106", 2, holds="model.weight.grad is None"), Shape("""
        class Trainer:
            def __init__(self):
                self.net = nn.Linear(3, 2)
                self.opt = torch.optim.Adam(self.net.parameters(), lr=0.01)
            def _scalar(self, t):
                total = t.sum()
                return torch.tensor(float(total), requires_grad=True)
            def objective(self, x):
                err = (self.net(x) ** 2).mean()
                return self._scalar(err)
            def fit(self, x):
                self.opt.zero_grad()
                self.objective(x).backward()
                self.opt.step()
        trainer = Trainer()
        trainer.fit(torch.randn(5, 3))
        """, "GT102", 7, holds="trainer.net.weight.grad is None")]),
    # GT445 through a method the loop calls every step (pytorch forums 47645)
    "parameter-built-in-per-step-method": (Shape("""
        class Net(nn.Module):
            def __init__(self, u):
                super().__init__()
                self.u = u
                self.fc = nn.Linear(4, 4)
            def set_weights(self):
                self.fc.weight = nn.Parameter(torch.sin(self.u))
            def forward(self, x):
                return self.fc(x)
        u = torch.randn(4, 4)
        model = Net(u)
        model.set_weights()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = model.fc.weight.detach().clone()
        for _ in range(2):
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT445", holds="not torch.equal(before, model.fc.weight)"), [Shape("""
        class Net(nn.Module):
            def __init__(self, u):
                super().__init__()
                self.u = u
                self.fc = nn.Linear(4, 4)
            def set_weights(self):
                self.fc.weight = nn.Parameter(torch.sin(self.u))
            def forward(self, x):
                return self.fc(x)
        u = torch.randn(4, 4, requires_grad=True)
        model = Net(u)
        opt = torch.optim.SGD([u], lr=0.1)
        for _ in range(2):
            model.set_weights()
            loss = model(torch.randn(3, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT445", 7, holds="u.grad is None"), Shape("""
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.reset_scale()
            def reset_scale(self):
                self._make()
            def _make(self):
                self.scale = nn.Parameter(torch.ones(2))
            def forward(self, x):
                return self.fc(x) * self.scale
        def train(net, opt, batches):
            for x in batches:
                net.reset_scale()
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
        net = Scaled()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        train(net, opt, [torch.randn(3, 4) for _ in range(2)])
        """, "GT445", 9,
        holds="all(p is not net.scale for g in opt.param_groups for p in g['params'])")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(SHAPES)
                                    for i in range(len(SHAPES[n][1]))])
def test_buggy_twin_is_reported(name: str, i: int) -> None:
    judge(PRELUDE, SHAPES[name][1][i])


def test_every_shape_has_two_twins() -> None:
    assert all(len(bads) >= 2 for _, bads in SHAPES.values())
