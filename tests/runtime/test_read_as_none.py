"""GT820 "its module never ran" against a layer correct code defines and never calls
(NOTE [read as None by the program] in `runtime/trace/declared.py`; issue 13, grokfast's
look-alike): the program's own code read the parameter's `.grad`, got None and went on to a
step, so it left the layer out knowingly. Real torch, in-process `gradtrace run`.

Bugs (GT820 kept at the layer's definition): a layer forgotten in forward whose gradients
only torch's `clip_grad_norm_` reads (library code, not the program); one where the program
reads `.grad` of other parameters only; one whose hand-written zero_grad tests every
`.grad` against None before the forward (all are None then). Look-alikes (silent): a filter skipping parameters
without a gradient (`if p.grad is None: continue`), and a list built with `is not None`.
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.aux = nn.Linear(8, 3)  # C
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(3):
    PRE
    F.mse_loss(model(x), y).backward()
    READ
    opt.step()
"""

BUGS = {
    "library_reads": "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
    "reads_other_parameters": "print(float(model.head.weight.grad.norm()))",
    # a hand-written zero_grad before the forward: every .grad is None there
    "own_zero_grad": """PRE:for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()""",
}

LOOKALIKES = {
    "skip_none": """for p in model.parameters():
        if p.grad is None:
            continue
        p.grad.mul_(0.5)""",
    "list_of_present": "norms = [p.grad.norm() for p in model.parameters() if p.grad is not None]",
}


def _src(read: str) -> str:
    pre = "opt.zero_grad()"
    if read.startswith("PRE:"):
        pre, read = read[4:], "pass"
    return HEAD.replace("PRE", pre).replace("READ", read).lstrip("\n")


@pytest.mark.parametrize("name", sorted(BUGS))
def test_forgotten_layer_reported(run_script, name):
    src = _src(BUGS[name])
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 0, res.err
    got = [(f["code"], f["line"]) for f in res.findings]
    assert got == [("GT820", line)], (got, res.err)
    assert "never ran" in res.findings[0]["message"]


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_layer_the_program_knows_is_unused_silent(run_script, name):
    res = run_script(_src(LOOKALIKES[name]))
    assert res.code == 0 and res.findings == [], (res.findings, res.err)
