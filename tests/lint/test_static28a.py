"""static28a (issue 13 parts 2-3): mechanisms from the graph_breaks, grad_mode, graph_lifetime,
registration and distributed misses, each with a silent look-alike that runs and buggy twins in
other spellings (a script, a function, a method), reported on the line a maintainer changes,
run on real torch."""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT505, mechanism: a training step backpropagates its loss and returns it undetached; the
    # loop calling it sums (or collects) the result into an accumulator that outlives the loop,
    # so every step's graph nodes stay reachable (the sum's grad_fn chains them). Reported on
    # the `return` (the fix: `return loss.detach()`).
    "step-returns-backpropagated-loss-summed-by-caller": (Shape("""
        def train_batch(net, opt, x, y):
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            return loss

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        running = 0.0
        for _ in range(3):
            running += train_batch(net, opt, torch.randn(4, 3), torch.randn(4, 1)).item()
        """, "GT505", holds="isinstance(running, float)"), [Shape("""
        def train_batch(net, opt, x, y):
            opt.zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            opt.step()
            return loss

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        running = 0.0
        for _ in range(3):
            running += train_batch(net, opt, torch.randn(4, 3), torch.randn(4, 1))
        """, "GT505", 6, holds="running.grad_fn is not None"), Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())
                self.history = []

            def update(self, batch):
                x, y = batch
                self.opt.zero_grad()
                err = (self.net(x) - y).abs().mean()
                err.backward()
                self.opt.step()
                return err

            def fit(self, batches):
                for batch in batches:
                    out = self.update(batch)
                    self.history.append(out)
                return self.history

        learner = Learner(nn.Linear(3, 1))
        hist = learner.fit([(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT505", 13, holds="all(h.grad_fn is not None for h in hist)")]),
    "step-returns-detached-loss": (Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())

            def update(self, x, y):
                self.opt.zero_grad()
                err = (self.net(x) - y).abs().mean()
                err.backward()
                self.opt.step()
                return err.detach()

            def fit(self, batches):
                total = torch.zeros(())
                for x, y in batches:
                    total += self.update(x, y)
                return total

        total = Learner(nn.Linear(3, 1)).fit([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
        """, "GT505", holds="total.grad_fn is None"), [Shape("""
        class Learner:
            def __init__(self, net):
                self.net = net
                self.opt = torch.optim.Adam(net.parameters())

            def update(self, x, y):
                self.opt.zero_grad()
                err = (self.net(x) - y).abs().mean()
                err.backward()
                self.opt.step()
                return err

            def fit(self, batches):
                total = torch.zeros(())
                for x, y in batches:
                    total = total + self.update(x, y) * len(x)
                return total

        total = Learner(nn.Linear(3, 1)).fit([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
        """, "GT505", 11, holds="total.grad_fn is not None"), Shape("""
        def one_step(model, optimizer, batch):
            loss = model(batch).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        losses = []
        for batch in [torch.randn(4, 3) for _ in range(3)]:
            losses.append(one_step(model, optimizer, batch))
        """, "GT505", 6, holds="losses[0].grad_fn is not None")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
