"""Mechanisms of held-out batch 6 (issue #13 §3) that one statement shows: each rule with a
look-alike that stays silent and trains, and buggy twins in other spellings than the
real-world case, reported on their line and showing the symptom on real torch.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT527: ReduceLROnPlateau(mode='max') stepped with a loss (selene#115)
    "plateau-max-mode-on-loss": (Shape("""
        def objective(pred, y):
            return ((pred - y) ** 2).mean()

        class Fitter:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, 'max',
                                                                        patience=0)
                self.x, self.y = torch.randn(32, 3), torch.randn(32, 1)

            def evaluate(self):
                with torch.no_grad():
                    return objective(self.net(self.x), self.y).item()

            def epoch(self):
                self.opt.zero_grad()
                objective(self.net(self.x), self.y).backward()
                self.opt.step()
                self.sched.step(-self.evaluate())

        fit = Fitter()
        for _ in range(4):
            fit.epoch()
        """, "GT527", holds="fit.opt.param_groups[0]['lr'] == 0.1"), [Shape("""
        from torch.optim import lr_scheduler

        net = nn.Linear(3, 1)
        crit = nn.MSELoss()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", patience=0)
        x, y = torch.randn(32, 3), torch.randn(32, 1)
        for epoch in range(4):
            optimizer.zero_grad()
            crit(net(x), y).backward()
            optimizer.step()
            losses = []
            for i in range(0, 32, 8):
                losses.append(crit(net(x[i:i + 8]), y[i:i + 8]).item())
            sched.step(metrics=sum(losses) / len(losses))
        """, "GT527", 6, holds="optimizer.param_groups[0]['lr'] < 0.1"), Shape("""
        def objective(pred, y):
            return ((pred - y) ** 2).mean()

        class Fitter:
            def __init__(self):
                self.net = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, 'max',
                                                                        patience=0)
                self.x, self.y = torch.randn(32, 3), torch.randn(32, 1)

            def evaluate(self):
                with torch.no_grad():
                    return objective(self.net(self.x), self.y).item()

            def epoch(self):
                self.opt.zero_grad()
                objective(self.net(self.x), self.y).backward()
                self.opt.step()
                self.sched.step(self.evaluate())

        fit = Fitter()
        for _ in range(4):
            fit.epoch()
        """, "GT527", 8, holds="fit.opt.param_groups[0]['lr'] < 0.1")]),
    # GT758: softmax probabilities into cross_entropy / nll_loss (activity-recognition#10)
    "probabilities-into-cross-entropy": (Shape("""
        net = nn.Sequential(nn.Linear(3, 3))
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        x, y = torch.eye(3) * 5, torch.arange(3)

        def train_step():
            logits = net(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss, torch.softmax(logits, 1).argmax(1)

        for _ in range(100):
            loss, pred = train_step()
        """, "GT758", holds="loss.item() < 0.05"), [Shape("""
        net = nn.Sequential(nn.Linear(3, 3), nn.Softmax(dim=1))
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        x, y = torch.eye(3) * 5, torch.arange(3)

        def train_step():
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        for _ in range(100):
            loss = train_step()
        """, "GT758", 1, holds="loss.item() > 0.5"), Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)

            def forward(self, h):
                logits = self.fc(h)
                probs = logits.softmax(-1)
                return probs

        class Trainer:
            def __init__(self):
                self.net = Scorer()
                self.crit = nn.NLLLoss()
                self.opt = torch.optim.Adam(self.net.parameters(), lr=0.1)

            def training_step(self, x, y):
                loss = self.crit(self.net(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                return loss

        t = Trainer()
        for _ in range(100):
            loss = t.training_step(torch.eye(3) * 5, torch.arange(3))
        """, "GT758", 8, holds="loss.item() < 0")]),
    # GT405: a parameters() generator stored in a dict, iterated, then given to the optimizer
    # (pytorch#110357)
    "parameters-generator-in-container": (Shape("""
        net = nn.Linear(3, 2)
        holder = dict(params=list(net.parameters()))
        print(sum(p.numel() for p in holder["params"]))
        opt = torch.optim.SGD(holder["params"], lr=0.1)
        w0 = net.weight.detach().clone()
        net(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
        """, "GT405", holds="not torch.equal(w0, net.weight)"), [Shape("""
        def build(net):
            groups = {"params": net.parameters(), "lr": 0.1}
            first = next(groups["params"])
            print(first.shape)
            return torch.optim.SGD(groups["params"], lr=groups["lr"])

        opt = build(nn.Linear(3, 2))
        """, "GT405", 2, holds="len(opt.param_groups[0]['params']) == 1"), Shape("""
        model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
        bag = dict(weights=model.parameters())
        for w in bag["weights"]:
            nn.init.zeros_(w)
        try:
            adam = torch.optim.Adam(bag["weights"], lr=1e-3)
        except ValueError as exc:
            err = str(exc)
        """, "GT405", 2, holds="'empty parameter list' in err")]),
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
