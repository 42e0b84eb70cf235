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
