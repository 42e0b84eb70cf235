"""Session 30, the lead: a model made again after its optimizer, trained by a helper.

The optimizer holds the first model's tensors; the second model runs and gets gradients that
nothing applies. The run names the line that made the model again (GT404, confirmed at run
time), and says nothing about the first model's layers "never running in a forward pass": they
are the old copy, and that wording would send the reader to ``forward``. A layer that really
never runs keeps its GT820.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn

torch.manual_seed(0)
LOADER = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
"""

BUGS = {
    "helper_trains": """
def train(model, optimizer, loader):
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()


def main():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))  # <- cause
    for epoch in range(2):
        train(model, optimizer, LOADER)


main()
""",
    "trainer_attribute": """
class Trainer:
    def __init__(self):
        self.model = nn.Linear(4, 1)
        self.opt = torch.optim.Adam(self.model.parameters())

    def reset(self):
        self.model = nn.Linear(4, 1)  # <- cause

    def fit(self):
        for x, y in LOADER:
            self.opt.zero_grad()
            nn.functional.mse_loss(self.model(x), y).backward()
            self.opt.step()


t = Trainer()
t.reset()
t.fit()
""",
}


def _run_findings(res):
    return [f for f in res.findings if f["source"] != "static"]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_model_made_again_is_named_without_never_ran(run_script, name):
    src = HEAD + BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert first["line"] == marked_line(src), res.findings
    assert first["code"] == "GT404", first
    assert not any("never ran" in f["message"] for f in res.findings), res.findings


UNUSED = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.extra = nn.Linear(4, 1)  # never called

    def forward(self, x):
        return self.fc(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in LOADER:
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
"""


def test_a_layer_that_never_runs_keeps_its_finding(run_script):
    res = run_script(HEAD + UNUSED)
    assert res.code == 0, res.err
    got = [f for f in _run_findings(res) if f["code"] == "GT820"]
    assert got and "never ran" in got[0]["message"] and "extra" in got[0]["message"], \
        res.findings
