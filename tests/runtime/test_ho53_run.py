"""Held-out batch 47 at run time (docs/triage/ho53.md), real torch, in other spellings than the
cases': no optimizer ever steps while backward() fills its gradients (GT913,
NOTE [no optimizer ever steps]) - a schedule stepped in the optimizer's place, an
accumulation period longer than the epoch; the look-alikes step (or update by hand)."""
from __future__ import annotations

import pytest

PROG = """
import torch
import torch.nn as nn
torch.manual_seed(0)

net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
sgd = torch.optim.SGD(net.parameters(), lr=0.1)
decay = torch.optim.lr_scheduler.StepLR(sgd, step_size=2)
data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
period = {period}
for epoch in range(3):
    for i, (x, y) in enumerate(data):
        loss = ((net(x) - y) ** 2).mean() / period
        loss.backward()
        if {test}:
            {update}
            sgd.zero_grad()
    decay.step()
"""


@pytest.mark.parametrize("period, test, update, line", [
    (8, "(i + 1) % period == 0", "sgd.step()", 14),                      # never holds
    (1, "True", "decay.step()", 15),                                     # the schedule instead
    (8, "(i + 1) % period == 0 or i + 1 == len(data)", "sgd.step()", None),
    (1, "True", "[p.data.sub_(0.1 * p.grad) for p in net.parameters()]", None),  # by hand
])
def test_no_optimizer_ever_steps(run_script, period, test, update, line) -> None:
    res = run_script(PROG.format(period=period, test=test, update=update))
    assert res.code == 0, res.err
    # (the run also reads the code: a static finding on the same line, GT544, stands for it)
    got = [f["line"] for f in res.findings if f["code"] in ("GT913", "GT544")]
    assert got == ([line] if line else []), res.err
