"""runtime46b on real torch, one process, a few steps, tiny models.

- NOTE [total never backpropagated] (GT868): a validation loop run without ``torch.no_grad()``
  that sums its losses into a tensor total (``val_loss += loss``): every batch's forward graph
  stays alive in the total, and no backward() ever runs through it. Named at the add. Silent:
  the total of ``.item()`` numbers; the same sum over time steps that is then backpropagated (an
  unrolled loss); a sum of many terms inside a module's forward evaluated with grad on; a
  training total that spans backward() calls (the static GT505's case); a program that never
  trains.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

VALIDATE = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.CrossEntropyLoss()


def train(batches):
    for x, y in batches:
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()


def validate(batches):
    model.eval()
    total = 0.0
    for x, y in batches:
        loss = crit(model(x), y)
        total += ADD  # <- add
    return total / len(batches)


def make(n):
    return [(torch.randn(4, 6), torch.randint(0, 3, (4,))) for _ in range(n)]


for epoch in range(2):
    model.train()
    train(make(3))
    print(validate(make(10)))
"""


def _codes(res: object) -> list[tuple[str, int]]:
    return [(f["code"], f["line"]) for f in res.findings]  # type: ignore[attr-defined]


def test_validation_total_with_graphs_named_at_the_add(run_script):
    src = VALIDATE.replace("ADD", "loss")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT868", marked_line(src, "# <- add"))], res.findings


def test_validation_total_of_numbers_is_silent(run_script):
    src = VALIDATE.replace("ADD", "loss.item()")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT868"], res.findings


def test_validation_under_no_grad_is_silent(run_script):
    src = VALIDATE.replace("ADD", "loss").replace(
        "    print(validate(make(10)))",
        "    with torch.no_grad():\n        print(validate(make(10)))")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not res.findings, res.findings


UNROLLED = """
import torch
import torch.nn as nn
torch.manual_seed(0)
cell = nn.GRUCell(4, 6)
head = nn.Linear(6, 2)
opt = torch.optim.Adam([*cell.parameters(), *head.parameters()], lr=1e-2)
for step in range(3):
    h = torch.zeros(2, 6)
    loss = torch.zeros(())
    for t in range(12):
        h = cell(torch.randn(2, 4), h)
        loss += nn.functional.cross_entropy(head(h), torch.randint(0, 2, (2,)))  # <- add
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
"""


def test_unrolled_sum_then_backpropagated_is_silent(run_script):
    res = run_script(UNROLLED)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT868"], res.findings


SUM_IN_FORWARD = """
import torch
import torch.nn as nn
torch.manual_seed(0)


class Ensemble(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(5, 2) for _ in range(10)])

    def forward(self, x):
        out = self.heads[0](x)
        for head in self.heads[1:]:
            out += head(x)  # <- add
        return out / len(self.heads)


model = Ensemble()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = model(torch.randn(3, 5)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
for step in range(3):
    print(model(torch.randn(3, 5)).argmax(-1).tolist())
"""


def test_sum_inside_a_forward_evaluated_with_grad_is_silent(run_script):
    res = run_script(SUM_IN_FORWARD)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT868"], res.findings


TRAIN_TOTAL = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Linear(5, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running = 0.0
for step in range(12):
    loss = model(torch.randn(4, 5)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    running += loss  # <- add
print(float(running))
"""


def test_training_total_across_backwards_is_not_gt868(run_script):
    res = run_script(TRAIN_TOTAL)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT868"], res.findings


def test_program_that_never_trains_is_silent(run_script):
    src = VALIDATE.replace("ADD", "loss").replace("    train(make(3))\n", "")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT868"], res.findings


# NOTE [NaN made by a step] (GT825): a hand-written optimizer whose step rescales by a ratio of
# norms; a weight whose gradient is all zeros gives 0 / 0 = NaN inside step(). Named at the
# division. Silent: the denominator clamped; the ratio replaced where the norm is 0 (the NaN
# made and dropped: the parameters stay finite).
RATIO_STEP = """
import torch
from torch import nn
torch.manual_seed(0)


class Rescaled(torch.optim.Optimizer):
    def __init__(self, params, lr=0.05):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                update = p.grad.sign()
                RATIO
                p.add_(update * ratio, alpha=-group["lr"])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 8, bias=False)
        self.out = nn.Linear(8, 1, bias=False)
        nn.init.zeros_(self.out.weight)

    def forward(self, x):
        return self.out(torch.relu(self.inp(x))).squeeze(-1)


model = Net()
opt = Rescaled(model.parameters())
x, y = torch.randn(16, 6), torch.randn(16)
for step in range(4):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
"""
BARE = "ratio = p.grad.norm() / update.norm()  # <- cause"
CLAMPED = "ratio = p.grad.norm() / update.norm().clamp(min=1e-8)"
GUARDED = ("n = update.norm()\n                ratio = torch.where(n > 0, p.grad.norm() / n, "
           "torch.ones(()))")


def test_nan_made_inside_a_user_step_named_at_its_division(run_script):
    src = RATIO_STEP.replace("RATIO", BARE)
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT825", marked_line(src))], res.findings


@pytest.mark.parametrize("ratio", [CLAMPED, GUARDED])
def test_user_step_without_nan_in_its_parameters_is_silent(run_script, ratio):
    res = run_script(RATIO_STEP.replace("RATIO", ratio))
    assert res.code == 0, res.err
    assert not res.findings, res.findings
