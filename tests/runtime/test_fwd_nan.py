"""A NaN made in the forward pass (NOTE [forward NaN origin]): GT825 names the forward line that
made it (or the -inf fill it multiplied on), not the optimizer step; look-alikes (the mask put
before the softmax, a NaN cleaned before the loss) stay silent. Real torch, in-process."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""

BUGS = {
    # per-sample standardisation over a batch of one: std of one value is NaN
    "std_of_single_sample": """
def standardise(feats):
    return (feats - feats.mean(0)) / feats.std(0)  # C

net = nn.Linear(3, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(1, 3)
loss = net(standardise(x)).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
""",
    # padding filled with -inf on the attention probabilities, then multiplied on with bmm
    "fill_after_softmax_then_bmm": """
class Attend(nn.Module):
    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(4, 8)

    def forward(self, x, pad):
        q, k = self.qk(x).chunk(2, -1)
        probs = torch.softmax(q @ k.transpose(1, 2), -1)
        probs = torch.masked_fill(probs, pad[:, None, :], float("-inf"))  # C
        return torch.bmm(probs, x)

m = Attend()
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
x = torch.randn(2, 5, 4)
pad = torch.zeros(2, 5, dtype=torch.bool)
pad[1, 3:] = True
loss = m(x, pad).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
""",
}

LOOKALIKES = {
    # the mask is applied to the scores, before the softmax
    "fill_before_softmax": """
class Attend(nn.Module):
    def __init__(self):
        super().__init__()
        self.qk = nn.Linear(4, 8)

    def forward(self, x, pad):
        q, k = self.qk(x).chunk(2, -1)
        scores = (q @ k.transpose(1, 2)).masked_fill(pad[:, None, :], float("-inf"))
        return torch.bmm(torch.softmax(scores, -1), x)

m = Attend()
opt = torch.optim.Adam(m.parameters(), lr=1e-3)
x = torch.randn(2, 5, 4)
pad = torch.zeros(2, 5, dtype=torch.bool)
pad[1, 3:] = True
loss = m(x, pad).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
""",
    # a NaN made on the way (0/0 of a constant column) is cleaned before the loss
    "nan_cleaned_before_loss": """
net = nn.Linear(3, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(6, 3)
x[:, 2] = 1.0
z = torch.nan_to_num((x - x.mean(0)) / (x - x.mean(0)).abs().max(0).values, nan=0.0)
loss = net(z).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
""",
}


def _line(src: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_forward_origin_named_first(run_script, name):
    src = (HEAD + BUGS[name]).lstrip("\n")
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT825", _line(src)), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and "GT825" not in res.codes(), res.findings
