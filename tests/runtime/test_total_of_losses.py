"""A running total of losses, each already backpropagated, backpropagated again (NOTE [total of
backpropagated losses]): the accumulation line leads, not the shared value's line; look-alikes
(a sum backpropagated once, a float total) run clean. Real torch, in-process."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(4, 5), torch.randn(4, 1)) for _ in range(3)]
"""

BUGS = {
    # `total = total + l` inside a function, the failing backward() at its end
    "rebinding_sum_in_function": """
def epoch(batches):
    total = 0
    for x, y in batches:
        l = F.mse_loss(model(x), y)
        opt.zero_grad()
        l.backward()
        opt.step()
        total = total + l  # C
    total.backward()

epoch(data)
""",
    # augmented sum at module level, no optimizer step in between
    "augmented_sum_without_step": """
epoch_loss = torch.zeros(())
for x, y in data:
    batch_loss = F.l1_loss(model(x), y)
    batch_loss.backward()
    epoch_loss += batch_loss  # C
epoch_loss.backward()
""",
}

LOOKALIKES = {
    # the losses summed first, one backward() on the sum
    "summed_then_one_backward": """
total = 0
for x, y in data:
    total = total + F.mse_loss(model(x), y)
opt.zero_grad()
total.backward()
opt.step()
""",
    # each loss backpropagated, the total kept as a float
    "float_running_total": """
running = 0.0
for x, y in data:
    l = F.mse_loss(model(x), y)
    opt.zero_grad()
    l.backward()
    opt.step()
    running += l.item()
print(running)
""",
}


def _line(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_accumulation_line_leads(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.code != 0 and res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT505", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_runs_clean(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and not res.findings, res.findings
