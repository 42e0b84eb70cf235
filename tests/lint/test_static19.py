"""Graph-lifetime and graph-break readings of docs/triage/static19.md, each in another spelling
than the real-world case it came from, next to a correct look-alike that stays silent.
Every snippet runs on real torch."""
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
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # tntorch (`optimize(tensors, loss_function)`): the loss comes from a callable passed in,
    # is backpropagated, and the loss tensor itself is appended to a history that is
    # returned: every step's graph stays alive. `backward()` on it says it holds a graph,
    # whatever made it. Look-alike: the history keeps `loss.item()`
    "passed-loss-function-result-collected": (Shape("""
        def fit(weights, objective, steps=3):
            opt = torch.optim.SGD(weights, lr=0.1)
            curve = []
            for _ in range(steps):
                opt.zero_grad()
                value = objective()
                value.backward()
                opt.step()
                curve.append(value.item())
            return curve
        w = torch.randn(3, requires_grad=True)
        curve = fit([w], lambda: (w ** 2).sum())
        """, "GT505", holds="all(isinstance(c, float) for c in curve)"), Shape("""
        def fit(weights, objective, steps=3):
            opt = torch.optim.SGD(weights, lr=0.1)
            curve = []
            for _ in range(steps):
                opt.zero_grad()
                value = objective()
                value.backward()
                opt.step()
                curve.append(value)
            return curve
        w = torch.randn(3, requires_grad=True)
        curve = fit([w], lambda: (w ** 2).sum())
        """, "GT505", 9, holds="all(c.grad_fn is not None for c in curve)")),
    # DQN (`self.cost_his.append(loss)` in `learn`): a method that runs backward() and step()
    # is one training step; the list on the object collects the loss with its graph at every
    # call. Look-alike: it collects `loss.item()`
    "training-step-method-keeps-loss-on-self": (Shape("""
        class Agent:
            def __init__(self):
                self.net = nn.Linear(4, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)
                self.seen = []
            def learn(self, x, y):
                err = F.mse_loss(self.net(x), y)
                self.opt.zero_grad()
                err.backward()
                self.opt.step()
                self.seen.append(err.item())
        agent = Agent()
        for _ in range(3):
            agent.learn(torch.randn(8, 4), torch.randn(8, 1))
        """, "GT505", holds="all(isinstance(e, float) for e in agent.seen)"), Shape("""
        class Agent:
            def __init__(self):
                self.net = nn.Linear(4, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)
                self.seen = []
            def learn(self, x, y):
                err = F.mse_loss(self.net(x), y)
                self.opt.zero_grad()
                err.backward()
                self.opt.step()
                self.seen.append(err)
        agent = Agent()
        for _ in range(3):
            agent.learn(torch.randn(8, 4), torch.randn(8, 1))
        """, "GT505", 11, holds="all(e.grad_fn is not None for e in agent.seen)")),
    # running loss (pytorch#17568) and SAM's second pass: a loss already backpropagated is
    # added into the loss backpropagated next; GT509 names that reuse. Look-alike: the
    # second pass starts a new sum
    "backpropagated-loss-added-into-the-next-loss": (Shape("""
        net = nn.Linear(5, 2)
        x, y = torch.randn(6, 5), torch.randn(6, 2)
        total = 0
        for head in range(2):
            total += F.mse_loss(net(x)[:, head], y[:, head])
        total.backward()
        total = 0
        for head in range(2):
            total += F.l1_loss(net(x)[:, head], y[:, head])
        total.backward()
        """, "GT509"), Shape("""
        net = nn.Linear(5, 2)
        x, y = torch.randn(6, 5), torch.randn(6, 2)
        total = 0
        for head in range(2):
            total += F.mse_loss(net(x)[:, head], y[:, head])
        total.backward()
        for head in range(2):
            total += F.l1_loss(net(x)[:, head], y[:, head])
        total.backward()
        """, "GT509", 8, raises=(RuntimeError, "backward through the graph a second time"))),
    # LYT-Net (`torch.histc(y_pred, ...)` in a histogram loss): histc has no gradient, so
    # the loss built on it never reaches the model. Look-alike: histc of the target only
    "loss-built-on-histc": (Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid())
        x, y = torch.randn(16, 4), torch.rand(16, 8)
        pred = net(x)
        target = torch.histc(y, bins=8, min=0.0, max=1.0) / y.numel()
        loss = F.l1_loss(pred.mean(0) / 8, target)
        loss.backward()
        """, "GT108", holds="net[0].weight.grad is not None"), Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid())
        x, y = torch.randn(16, 4), torch.rand(16, 8)
        pred = net(x)
        counts = pred.histc(bins=8, min=0.0, max=1.0)
        loss = F.l1_loss(counts / pred.numel(), torch.full((8,), 1 / 8))
        loss.backward()
        """, "GT108", 4, raises=(RuntimeError, "does not require grad"))),
    # Composer (`for loss in ensure_tuple(losses): loss.backward()`): the items of one
    # loss call share the model's graph; the first backward frees it. Look-alike: the items
    # come from one forward pass each
    "backward-on-each-item-of-one-loss-call": (Shape("""
        net = nn.Linear(3, 2)
        batches = [(torch.randn(4, 3), torch.randn(4, 2)) for _ in range(2)]
        parts = [F.mse_loss(net(xb), yb) for xb, yb in batches]
        for part in parts:
            part.backward()
        """, "GT509", holds="net.weight.grad is not None"), Shape("""
        def both_losses(scores, target):
            return F.mse_loss(scores, target), scores.abs().mean()
        net = nn.Linear(3, 2)
        x, y = torch.randn(4, 3), torch.randn(4, 2)
        scores = net(x)
        parts = both_losses(scores, y)
        for part in parts:
            part.backward()
        """, "GT509", 7, raises=(RuntimeError, "backward through the graph a second time"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
