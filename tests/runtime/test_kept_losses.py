"""Backpropagated losses kept alive in a container (NOTE [losses kept alive]): named at the
statement that stores them; look-alikes (a float, a detached copy, only the last loss kept)
stay silent. Real torch, in-process."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
data = [(torch.randn(6, 4), torch.randn(6, 1)) for _ in range(6)]
"""

BUGS = {
    # a trainer keeps each step's loss on self through append
    "method_appends_to_attribute": """
class Trainer:
    def __init__(self):
        self.history = []

    def fit(self, batches):
        for x, y in batches:
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            self.history.append(loss)  # C

trainer = Trainer()
trainer.fit(data)
print(len(trainer.history))
""",
    # a preallocated list written by index at module level
    "index_store_at_module_level": """
losses = [None] * len(data)
for i, (x, y) in enumerate(data):
    opt.zero_grad()
    l = F.l1_loss(model(x), y)
    l.backward()
    opt.step()
    losses[i] = l  # C
""",
}

# A twin of the unrolled look-alikes below: the same running total over separate training
# steps (weights stepped in place) keeps every step's graph.
BUGS["running_total_over_separate_steps"] = """
total = 0
for x, y in data:
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    total += loss  # C
print(float(total))
"""

LOOKALIKES = {
    # learning to learn: the iterate is updated out of place and carried, so the steps are one
    # graph; the losses (a list and a running total) are the unroll's objective
    "unrolled_iterate_losses_kept": """
theta = torch.zeros(4, requires_grad=True)
meta, kept = 0, []
for x, y in data:
    loss = F.mse_loss(model(theta.expand_as(x) + x), y)
    meta += loss
    kept.append(loss)
    loss.backward(retain_graph=True)
    theta = theta - 0.1 * theta.grad.detach()
    theta.retain_grad()
print(float(meta), len(kept))
""",
    "history_of_floats": """
history = []
for x, y in data:
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    history.append(loss.item())
""",
    "history_of_detached_tensors": """
history = []
for x, y in data:
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    history.append(loss.detach())
""",
    "only_last_loss_kept": """
class Fit:
    last = None

fit = Fit()
for x, y in data:
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    fit.last = loss
""",
}


def _line(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_store_named_first(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT505", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and "GT505" not in res.codes(), res.findings
