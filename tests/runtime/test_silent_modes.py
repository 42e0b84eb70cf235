"""Training in eval mode (NOTE [eval-mode training]): a model that trained in train mode and
then runs its training forward in eval mode is reported at the line of the training loop that
switched it; each look-alike stays silent. Real torch, tiny models, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def batches(n):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g))
            for _ in range(n)]
"""

BUGS = {
    # the validation helper called inside the loop leaves the model in eval mode
    "validation_method_mid_epoch": """
class Runner:
    def __init__(self, net, opt):
        self.net, self.opt = net, opt

    def check(self, data):
        self.net.eval()
        with torch.no_grad():
            return [self.net(x).argmax(1) for x, _ in data]

    def fit(self, data):
        self.net.train()
        for i, (x, y) in enumerate(data):
            if i == 1:
                self.check(data[:1])  # C
            self.opt.zero_grad()
            F.cross_entropy(self.net(x), y).backward()
            self.opt.step()

net = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.3), nn.Linear(8, 3))
Runner(net, torch.optim.SGD(net.parameters(), lr=0.1)).fit(batches(4))
""",
    # eval() through a chain of helpers, the step inside another helper; BatchNorm only
    "eval_through_helpers_step_in_helper": """
def set_eval(m):
    m.eval()

def evaluate(m, data):
    set_eval(m)
    with torch.no_grad():
        return sum(float(F.cross_entropy(m(x), y)) for x, y in data)

def train_step(m, opt, x, y):
    opt.zero_grad()
    F.cross_entropy(m(x), y).backward()
    opt.step()

model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = batches(3)
for epoch in range(2):
    for x, y in data:
        train_step(model, opt, x, y)
    evaluate(model, data[:1])  # C
""",
}

LOOKALIKES = {
    # train() at the top of every epoch: validation leaves eval mode behind only until then
    "train_at_every_epoch": """
model = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.3), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    model.train()
    for x, y in batches(2):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        model(batches(1)[0][0])
""",
    # an evaluation with grad on (no no_grad), back in train mode before the next step
    "grad_on_evaluation_then_train": """
model = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.3), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches(4):
    model.train()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    model.eval()
    val = F.cross_entropy(model(x), y)
""",
    # BatchNorm layers frozen on purpose after a warm-up, inside a model in train mode
    "batchnorm_frozen_after_warmup": """
model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model.train()
for i, (x, y) in enumerate(batches(4)):
    if i == 2:
        for m in model.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.eval()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # fine-tuning in eval mode from the start, on purpose (it never trained in train mode)
    "eval_mode_finetuning_from_the_start": """
model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches(3):
    model.eval()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # nothing acts differently in eval mode: no dropout, no normalisation
    "no_mode_dependent_layer": """
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(batches(4)):
    if i == 2:
        model.eval()
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_switch_line_named_first(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT516", line), res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and "GT516" not in res.codes(), res.findings
