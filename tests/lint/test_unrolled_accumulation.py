"""GT505 and unrolled optimisation: a loss computed from a tensor the loop carries as a function
of itself (``x = x + update``: learning to learn, truncated BPTT) chains every pass's graph
through that tensor; summing the losses is the unroll's objective, not a leak. A loop that
carries no such tensor still keeps every pass's graph in its running total. Every snippet runs
on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # learning-to-learn (yangsenius/learning-to-learn-by-pytorch#5): the iterate is updated
    # out of place on every pass and the losses are summed into the meta-objective; the
    # passes' graphs are chained through the iterate whatever the sum keeps.
    # Twin: the same total over a loop whose weights are stepped in place (nothing carried).
    "unrolled-iterate": (Shape("""
        probe = torch.nn.Linear(3, 1)

        def unroll(target, steps=5, lr=0.1):
            theta = torch.zeros(3, requires_grad=True)
            meta_loss = 0
            for _ in range(steps):
                loss = ((probe(theta) - target) ** 2).sum()
                meta_loss += loss
                loss.backward(retain_graph=True)
                theta = theta - lr * theta.grad.detach()
                theta.retain_grad()
            return meta_loss
        total = unroll(torch.ones(1))
        """, "GT505", holds="total.grad_fn is not None and total.item() > 0"), Shape("""
        probe = torch.nn.Linear(3, 1)

        def train(target, steps=5, lr=0.1):
            opt = torch.optim.SGD(probe.parameters(), lr=lr)
            running = 0
            for _ in range(steps):
                opt.zero_grad()
                loss = ((probe(target) - 1) ** 2).sum()
                loss.backward()
                opt.step()
                running += loss
            return running
        total = train(torch.ones(3))
        """, "GT505", 11, holds="total.grad_fn is not None")),
    # Truncated BPTT: the hidden state is carried but detached on every pass (here by a helper of
    # the file), so the passes' graphs are separate and the running total keeps each of them.
    # Look-alike: the total of `loss.item()`.
    "carried-state-detached-each-pass": (Shape("""
        cell = torch.nn.RNNCell(3, 5)
        head = torch.nn.Linear(5, 1)
        opt = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
        h, running = torch.zeros(2, 5), 0.0
        for _ in range(4):
            h = cell(torch.randn(2, 3), h)
            loss = head(h).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.item()
            h = h.detach()
        """, "GT505", holds="isinstance(running, float)"), Shape("""
        def cut_history(state):
            return state.detach()

        cell = torch.nn.RNNCell(3, 5)
        head = torch.nn.Linear(5, 1)
        opt = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.1)
        h, running = torch.zeros(2, 5), 0
        for _ in range(4):
            h = cell(torch.randn(2, 3), h)
            loss = head(h).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss
            h = cut_history(h)
        """, "GT505", 14, holds="running.grad_fn is not None")),
    # A counter carried across passes (`scale = scale * 0.9`) that the loss does not read
    # changes nothing: the running total still keeps every pass's graph.
    "carried-number-the-loss-does-not-read": (Shape("""
        net = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        total, scale = 0.0, 1.0
        for _ in range(4):
            opt.zero_grad()
            loss = ((net(torch.ones(3)) - 1) ** 2).sum()
            loss.backward()
            opt.step()
            scale = scale * 0.9
            total += loss.item() * scale
        """, "GT505", holds="isinstance(total, float)"), Shape("""
        net = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        total, scale = 0.0, 1.0
        for _ in range(4):
            opt.zero_grad()
            loss = ((net(torch.ones(3)) - 1) ** 2).sum()
            loss.backward()
            opt.step()
            scale = scale * 0.9
            total += loss * scale
        """, "GT505", 10, holds="total.grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
