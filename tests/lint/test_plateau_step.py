"""GT531: ReduceLROnPlateau stepped without its metric. Buggy twins (other spellings than the
rule's example) are reported on their line and raise on real torch; the look-alikes (the metric
given by keyword or position, an epoch scheduler stepped bare) stay silent and run.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    "plateau-step-without-metric": (Shape("""
        from torch.optim.lr_scheduler import ReduceLROnPlateau, StepLR

        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        plateau = ReduceLROnPlateau(opt, patience=0)
        decay = StepLR(opt, step_size=1)
        for epoch in range(3):
            loss = net(torch.randn(4, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            decay.step()
            plateau.step(metrics=loss.item())
        """, "GT531"), [Shape("""
        from torch.optim.lr_scheduler import ReduceLROnPlateau

        net = nn.Linear(3, 1)
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        on_plateau = ReduceLROnPlateau(opt, mode="min")
        for epoch in range(3):
            loss = net(torch.randn(4, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            on_plateau.step()
        """, "GT531", 11, "missing 1 required positional argument"), Shape("""
        class Fit:
            def __init__(self):
                self.model = nn.Linear(3, 1)
                self.optim = torch.optim.SGD(self.model.parameters(), lr=0.1)
                self.lr_sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.optim)

            def epoch(self):
                self.optim.zero_grad()
                self.model(torch.randn(4, 3)).sum().backward()
                self.optim.step()
                self.lr_sched.step()

        Fit().epoch()
        """, "GT531", 11, "missing 1 required positional argument")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_raise(name: str) -> None:
    _, bads = SHAPES[name]
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
