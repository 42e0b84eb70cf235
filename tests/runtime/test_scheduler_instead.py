"""GT872: a learning-rate scheduler steps where `optimizer.step()` belongs, and no optimizer ever
steps while backward() runs (SfmLearner#5 in held-out 8: `if scheduler: scheduler.step() else:
optimizer.step()`): the scheduler's step line. Twins in other spellings; look-alikes: the
scheduler after the optimizer, and a script that previews a schedule without training (torch
warns there too, but no backward() runs). Real torch, in-process `gradtrace run`.
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
"""

BUGS = {
    "exponential_lr_in_train_function": """
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)

def train(batches):
    for x, y in batches:
        opt.zero_grad()
        nn.functional.mse_loss(net(x), y).backward()
        sched.step()  # C

train([(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)])
""",
    "one_cycle_in_trainer_method": """
class Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.lr_schedule = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, max_lr=1e-2,
                                                               total_steps=10)

    def fit(self, steps):
        for _ in range(steps):
            logits = self.model(torch.randn(6, 3))
            loss = nn.functional.cross_entropy(logits, torch.randint(0, 2, (6,)))
            self.optimizer.zero_grad()
            loss.backward()
            self.lr_schedule.step()  # C

Trainer().fit(3)
""",
}

LOOKALIKES = {
    "scheduler_after_optimizer": """
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
for _ in range(4):
    opt.zero_grad()
    nn.functional.mse_loss(net(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    opt.step()
    sched.step()
""",
    "schedule_previewed_without_training": """
import warnings

opt = torch.optim.SGD(nn.Linear(4, 1).parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
rates = []
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for _ in range(10):
        rates.append(sched.get_last_lr()[0])
        sched.step()
print(min(rates), max(rates))
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_scheduler_in_place_of_optimizer_step(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 0 and res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT872", line), (res.findings, res.err)


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], (res.findings, res.err)
