"""GT433 widened: a manual update `p -= lr * p.grad` over every parameter of a model that holds
frozen ones (frozen by a flag, or declared `nn.Parameter(..., requires_grad=False)` in a class of
the file). Buggy twins are reported on their line and raise on real torch; the look-alikes
(guarded by `p.grad is None`, or over trainable parameters only) stay silent and train.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "manual-update-over-frozen": (Shape("""
        class Masked(nn.Module):
            def __init__(self):
                super().__init__()
                self.keep = nn.Parameter(torch.ones(3, 4), requires_grad=False)
                self.w = nn.Parameter(torch.randn(3, 4))

            def forward(self, x):
                return x @ (self.w * self.keep).t()

        net = Masked()
        w0 = net.w.detach().clone()
        for _ in range(2):
            net.zero_grad()
            net(torch.randn(5, 4)).pow(2).mean().backward()
            with torch.no_grad():
                for w in net.parameters():
                    if w.grad is None:
                        continue
                    w -= 0.1 * w.grad
        trainable = [p for p in net.parameters() if p.requires_grad]
        with torch.no_grad():
            for p in trainable:
                p.data.add_(-0.1 * p.grad)
        """, "GT433", holds="not torch.equal(w0, net.w)"), [Shape("""
        class Masked(nn.Module):
            def __init__(self):
                super().__init__()
                self.keep = nn.Parameter(torch.ones(3, 4), requires_grad=False)
                self.w = nn.Parameter(torch.randn(3, 4))

            def forward(self, x):
                return x @ (self.w * self.keep).t()

        net = Masked()
        net(torch.randn(5, 4)).pow(2).mean().backward()
        for w in net.parameters():
            w.data -= 0.1 * w.grad
        """, "GT433", 13, "unsupported operand"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.head = nn.Linear(4, 4), nn.Linear(4, 1)

            def forward(self, x):
                return self.head(torch.tanh(self.body(x)))

        model = Net()
        for p in model.body.parameters():
            p.requires_grad = False
        lr = 0.05
        model(torch.randn(6, 4)).sum().backward()
        for p in model.parameters():
            p.data.add_(-lr * p.grad)
        """, "GT433", 15, "unsupported operand")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_raise(name: str) -> None:
    _, bads = SHAPES[name]
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
