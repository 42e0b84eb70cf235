"""crash42, session 42: a backward() of a loss with no graph (GT800 at the backward() line, the
symptom) is accounted for by the static GT122 on the constant one path makes the loss
(`torch.zeros(1) if correct else margin`): the constant's line leads, the run's GT800 is its
evidence (runtime/fuse_tables.py, EXPLAINS["graph-cut"]). The look-alike, which skips the
backward when the loss has no graph, is silent."""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

torch = pytest.importorskip("torch")

CONSTANT = """
import torch
import torch.nn as nn
torch.manual_seed(0)
class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        self.score = nn.Linear(4, 3)
        nn.init.zeros_(self.score.weight)
        nn.init.zeros_(self.score.bias)
    def loss(self, x, gold):
        scores = self.score(x)
        pred = scores.argmax(-1)
        margin = (scores.max(-1).values - scores.gather(1, gold[:, None])[:, 0]).sum()
        return torch.zeros(1) if torch.equal(pred, gold) else margin.view(1)  # <- cause
model = Ranker()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2, 4)
for step in range(2):
    gold = torch.full((2,), step % 2)
    loss = model.loss(x, gold)
    opt.zero_grad()
    {GUARD}loss.backward()
    {GUARD}opt.step()
"""


def test_constant_loss_leads_the_backward_without_graph(run_script):
    src = CONSTANT.replace("{GUARD}", "")
    res = run_script(src)
    assert res.findings, res.err
    f = res.findings[0]
    assert f["code"] == "GT122" and f["line"] == marked_line(src), f
    assert any("(GT800)" in r["message"] for r in f["related"])


def test_backward_skipped_without_graph_is_silent(run_script):
    src = CONSTANT.replace("{GUARD}", "if loss.requires_grad:  ")
    res = run_script(src)
    assert res.code == 0 and res.findings == [], res.err
