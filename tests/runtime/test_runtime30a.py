"""Session 30 run-time cuts (docs/triage/runtime30a.md): nothing of ours left on torch's module
path between armed steps, and the diagnoses those steps feed unchanged."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

import gradtrace
from gradtrace.runtime.pace import WARM_STEPS


def _global_module_hooks() -> int:
    from torch.nn.modules import module as mm

    return len(mm._global_forward_pre_hooks) + len(mm._global_forward_hooks)


def test_dropout_watch_is_out_between_armed_steps():
    """A model with dropout installs the dropout watch (a global forward hook); between armed
    steps no global module hook is left (any one sends every module call down torch's slow
    path), and the weights are those of a plain run."""
    def loop(tr=None):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.5), nn.ReLU(), nn.Linear(16, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x, y = torch.randn(8, 4), torch.randn(8, 2)
        hooked = []
        for _ in range(WARM_STEPS + 30):
            hooked.append((tr is not None and tr.arming.armed, _global_module_hooks()))
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
        return hooked, [p.detach().clone() for p in model.parameters()]

    before = _global_module_hooks()
    _, plain = loop()
    with gradtrace.trace(every=7) as tr:
        hooked, traced = loop(tr)
    assert _global_module_hooks() == before
    assert tr.hooks.data.drops is not None  # the watch was installed
    assert all(n == before + 2 for armed, n in hooked[1:] if armed)  # pre-hook + watch
    assert any(not armed for armed, _ in hooked)
    assert all(n == before for armed, n in hooked if not armed)
    assert all(torch.equal(a, b) for a, b in zip(plain, traced))
