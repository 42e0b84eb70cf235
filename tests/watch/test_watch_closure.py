"""watch() with optimizers whose step(closure) computes the gradients inside step (L-BFGS)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import gradtrace
from gradtrace.runtime.watch.watcher import watch_all


def _lbfgs_loop(every_run: str, steps: int = 6) -> tuple[gradtrace.runtime.watch.watcher.Watcher,  # type: ignore[name-defined]
                                                          list[float]]:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.LBFGS(m.parameters(), lr=0.5, max_iter=4)
    x, y = torch.randn(32, 3), torch.randn(32, 1)

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        return loss

    losses = []
    w = gradtrace.watch(m, opt) if every_run == "watch" else watch_all()
    with w:
        for _ in range(steps):
            losses.append(opt.step(closure).item())
    return w, losses


@pytest.mark.parametrize("how", ["watch", "watch_all"])
def test_lbfgs_that_trains_has_no_finding_and_its_gradients(how: str) -> None:
    w, losses = _lbfgs_loop(how)
    assert losses[-1] < losses[0]
    assert w.report.findings == ()  # was GT850 "got no gradient" for every parameter
    track = w.report.tracks[0]
    assert track.total_steps == 6
    assert all(n is not None and n > 0 for s in track.steps for n in s.norm)
    assert any(r is not None and r > 0 for s in track.steps for r in map(s.update_ratio, range(len(s.norm))))


def test_functional_loss_is_seen_as_the_tensor_backward_starts_from() -> None:
    torch.manual_seed(0)
    m = nn.Linear(3, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    seen = []
    with gradtrace.trace() as tr, gradtrace.watch(m, opt) as w:
        for _ in range(3):
            opt.zero_grad()
            loss = nn.functional.mse_loss(m(x), y)
            loss.backward()
            seen.append(loss.item())
            torch.autograd.grad(m(x).sum(), m.weight)  # a penalty-style grad() is no loss
            opt.step()
    assert [s.loss for s in w.report.tracks[0].steps] == pytest.approx(seen)
    assert tr.findings == []  # reading the loss is not the user's detach()
    from gradtrace.runtime.loss_listeners import LOSS_LISTENERS

    assert LOSS_LISTENERS == []  # removed with the watch
