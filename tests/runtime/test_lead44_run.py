"""GT513 (NOTE [accumulated means not scaled]) counts a window only when two of its backward()
calls reached the stepping optimizer's parameters: two adapters backpropagated one after the
other, then their two optimizers stepped, is one backward() per optimizer (held-out 38's open-rl
look-alike), while one optimizer, or two stepped together, summing two micro-batches is
accumulation."""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
base = nn.Linear(8, 8).requires_grad_(False)
heads = {"a": nn.Linear(8, 1), "b": nn.Linear(8, 1)}
data = {k: (torch.randn(16, 8), torch.randn(16, 1)) for k in heads}


def backward_of(k):
    x, y = data[k]
    loss = F.mse_loss(heads[k](base(x)), y)
    loss.backward()  # <- cause
"""

SILENT = {
    "one-backward-per-optimizer": """
opts = {k: torch.optim.SGD(h.parameters(), lr=0.1) for k, h in heads.items()}
for step in range(6):
    backward_of("a")
    backward_of("b")
    opts["a"].step()
    opts["b"].step()
    opts["a"].zero_grad()
    opts["b"].zero_grad()
""",
}

BUGS = {
    "one-optimizer-two-micro-batches": """
opt = torch.optim.SGD([p for h in heads.values() for p in h.parameters()], lr=0.1)
for step in range(6):
    backward_of("a")
    backward_of("a")
    opt.step()
    opt.zero_grad()
""",
    "two-optimizers-stepped-together": """
opts = {k: torch.optim.SGD(h.parameters(), lr=0.1) for k, h in heads.items()}
for step in range(6):
    backward_of("a")
    backward_of("a")
    opts["a"].step()
    opts["b"].step()
    opts["a"].zero_grad()
    opts["b"].zero_grad()
""",
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_one_backward_per_optimizer_is_no_accumulation(name, run_script):
    res = run_script(HEAD + SILENT[name])
    assert res.code == 0, res.err
    assert "GT513" not in res.codes(), res.findings


@pytest.mark.parametrize("name", sorted(BUGS))
def test_two_backwards_into_one_optimizer_reported(name, run_script):
    src = HEAD + BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    hits = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT513"]
    assert hits == [("GT513", marked_line(src))], res.findings
