"""static29a (mutation study, issue 13's shapes): a step of an optimizer handed in (an
argument, ``self.optimizer``) that runs after the pass's ``zero_grad()`` and before its only
``backward()`` never finds a gradient, whatever the optimizer holds (NOTE [step of unknown
parameters] in rules/training_loop/step_early.py); twins in a loop, a step method and another
spelling, run on real torch (the weights never change); the look-alike steps the previous
pass's gradient before clearing."""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "step-of-handed-in-optimizer-before-backward": (Shape("""
        def train(model, opt, batches):
            x0, y0 = batches[0]
            F.mse_loss(model(x0), y0).backward()
            for x, y in batches[1:]:
                opt.step()
                opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                loss.backward()
            opt.step()

        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        train(net, torch.optim.SGD(net.parameters(), lr=0.1),
              [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT522", holds="not torch.equal(net.weight, w0)"), [Shape("""
        def train(model, optimizer, batches):
            for x, y in batches:
                optimizer.zero_grad()
                loss = F.mse_loss(model(x), y)
                optimizer.step()
                loss.backward()

        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        train(net, torch.optim.SGD(net.parameters(), lr=0.1),
              [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT522", 5, holds="torch.equal(net.weight, w0)"), Shape("""
        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer

            def train_step(self, x, y):
                self.optimizer.zero_grad()
                out = self.model(x)
                loss = F.cross_entropy(out, y)
                self.optimizer.step()
                loss.backward()
                return loss.item()

        net = nn.Linear(3, 2)
        w0 = net.weight.detach().clone()
        t = Trainer(net, torch.optim.Adam(net.parameters()))
        for _ in range(3):
            t.train_step(torch.randn(4, 3), torch.randint(0, 2, (4,)))
        """, "GT522", 10, holds="torch.equal(net.weight, w0)"), Shape("""
        def fit(net, opt, criterion, loader, epochs=2):
            for _ in range(epochs):
                for batch in loader:
                    opt.zero_grad(set_to_none=True)
                    pred = net(batch[0])
                    err = criterion(pred, batch[1]) + 0.01 * pred.abs().mean()
                    opt.step()
                    err.backward()

        net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
        w0 = net[0].weight.detach().clone()
        fit(net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), nn.MSELoss(),
            [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT522", 7, holds="torch.equal(net[0].weight, w0)")]),
    # GT522, the clear after: step, backward, then zero_grad() of the same parameters with no
    # step and no gradient read between; the look-alike reads the input's gradient there (an
    # adversarial example) before clearing, and its step is fed by the backward before it
    "step-then-backward-cleared-right-after": (Shape("""
        def train(model, opt, batches, eps=0.1):
            for x, y in batches:
                F.mse_loss(model(x), y).backward()
                opt.step()
                x = x.clone().requires_grad_(True)
                F.mse_loss(model(x), y).backward()
                x_adv = x + eps * x.grad.sign()
                model.zero_grad()

        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        train(net, torch.optim.SGD(net.parameters(), lr=0.1),
              [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT522", holds="not torch.equal(net.weight, w0)"), [Shape("""
        def fit(model, optim, batches):
            for x, y in batches:
                loss = F.mse_loss(model(x), y)
                optim.step()
                loss.backward()
                model.zero_grad()

        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        fit(net, torch.optim.SGD(net.parameters(), lr=0.1),
            [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT522", 4, holds="torch.equal(net.weight, w0)"), Shape("""
        class Learner:
            def __init__(self, net, opt):
                self.net, self.opt = net, opt

            def update(self, x, y):
                loss = F.mse_loss(self.net(x), y)
                self.opt.step()
                loss.backward()
                self.opt.zero_grad(set_to_none=True)

        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        learner = Learner(net, torch.optim.Adam(net.parameters()))
        for _ in range(3):
            learner.update(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT522", 7, holds="torch.equal(net.weight, w0)")]),
    # GT404: the model re-created by the same call after the optimizer was built over the
    # first object's parameters, whatever its class (one of another file, here a builder the
    # snippet defines as a plain function); in __init__, the optimizer stepped by a method
    "model-made-again-by-the-same-call": (Shape("""
        def build(d):
            return nn.Sequential(nn.Linear(d, 4), nn.ReLU(), nn.Linear(4, 1))

        def main(batches):
            model = build(3)
            model = build(3).train()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            w0 = model[0].weight.detach().clone()
            for x, y in batches:
                optimizer.zero_grad()
                F.mse_loss(model(x), y).backward()
                optimizer.step()
            return not torch.equal(model[0].weight, w0)

        assert main([(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)])
        """, "GT404"), [Shape("""
        def build(d):
            return nn.Sequential(nn.Linear(d, 4), nn.ReLU(), nn.Linear(4, 1))

        def main(batches):
            model = build(3)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model = build(3)
            w0 = model[0].weight.detach().clone()
            for x, y in batches:
                optimizer.zero_grad()
                F.mse_loss(model(x), y).backward()
                optimizer.step()
            return torch.equal(model[0].weight, w0)

        assert main([(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)])
        """, "GT404", 7), Shape("""
        def build(d):
            return nn.Linear(d, 1)

        class Trainer:
            def __init__(self, d):
                self.model = build(d)
                self.optimizer = torch.optim.Adam(self.model.parameters())
                self.model = build(d)

            def train_step(self, x, y):
                self.optimizer.zero_grad()
                loss = F.mse_loss(self.model(x), y)
                loss.backward()
                self.optimizer.step()

        t = Trainer(3)
        w0 = t.model.weight.detach().clone()
        t.train_step(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT404", 8, holds="torch.equal(t.model.weight, w0)"), Shape("""
        def build(d):
            return nn.Linear(d, 1)

        net = build(3).to("cpu")
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        net = build(3).to("cpu").train()
        w0 = net.weight.detach().clone()
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(4, 3)).sum().backward()
            opt.step()
        """, "GT404", 6, holds="torch.equal(net.weight, w0)")]),
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


def test_step_method_of_plain_class_with_no_grad_action_is_checked() -> None:
    """GT501 and GT516 kept two different tables under one memo key ("gt5-defs"): a plain
    class whose action method runs its net under no_grad and whose step method calls a
    method of its own made GT501 crash (GT002) instead of naming the missing clear."""
    from gradtrace.lint import check_source

    src = (
        "import torch\nimport torch.nn as nn\n\n\nclass QNet(nn.Module):\n    pass\n\n\n"
        "class Agent(object):\n    def __init__(self, args):\n        self.q_net = QNet()\n\n"
        "    def choose_action(self, x):\n        with torch.no_grad():\n"
        "            q = self.q_net(x)\n        return q\n\n"
        "    def train(self, batch):\n        inputs = self.get_inputs(batch)\n"
        "        loss = self.q_net(inputs).mean()\n        loss.backward()\n"
        "        self.optimizer.step()\n"
    )
    found = [(f.line, f.code) for f in check_source(src, "agent.py")]
    assert (21, "GT501") in found and not any(c == "GT002" for _, c in found)
