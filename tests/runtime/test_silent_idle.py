"""Optimizer steps with nothing to apply (NOTE [idle steps]) and the static rules fused with
them: the cause line named first, in spellings other than the real-world cases they came from
(tests/realworld/cases/freezing/finetune_sam_*, supervlad_*, autograd_api/lbfgs_*, fitgabor_*,
graph_breaks/dgunet_*), and look-alikes that train (and stay silent). Real torch, in-process."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))

def batches(n=4):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g))
            for _ in range(n)]
"""

BUGS = {
    # the body is frozen as a module, then the head parameter by parameter: nothing is left
    # to train, and the loss is forced to require grad so backward() does not fail
    "everything_frozen_loss_forced": ("GT840", """
model = Net()
model.body.requires_grad_(False)
for name, p in model.head.named_parameters():
    p.requires_grad_(False)  # C
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y).requires_grad_()
    loss.backward()
    opt.step()
"""),
    # a closure handed to a first-order optimizer that only evaluates the loss
    "lambda_closure_without_backward": ("GT840", """
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    opt.step(lambda: F.cross_entropy(model(x), y))  # C
"""),
    # a method of a trainer class: the closure calls a helper that computes the loss only
    "closure_calls_loss_helper_only": ("GT707", """
class Fitter:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)

    def objective(self, x, y):
        return F.cross_entropy(self.model(x), y)

    def fit(self, data):
        for x, y in data:
            def evaluate():
                self.opt.zero_grad()
                value = self.objective(x, y)
                return value  # C
            self.opt.step(evaluate)

Fitter(Net()).fit(batches())
"""),
    # the head's optimizer unfreezes its parameters only around its own step
    "unfrozen_only_around_step": ("GT840", """
model = Net()
opt_body = torch.optim.SGD(model.body.parameters(), lr=0.1)
opt_head = torch.optim.Adam(model.head.parameters(), lr=1e-3)
for x, y in batches(5):
    opt_body.zero_grad()
    opt_head.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt_body.step()
    model.head.requires_grad_(True)
    opt_head.step()
    model.head.requires_grad_(False)  # C
"""),
    # per-stage losses rebuilt as a new leaf from numbers: stages in a ModuleList
    "stage_losses_rebuilt_from_numbers": ("GT102", """
class Stages(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(6, 6) for _ in range(3))

    def forward(self, x):
        outs = []
        for b in self.blocks:
            x = x + b(x)
            outs.append(x)
        return outs

model = Stages()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
target = torch.zeros(4, 6)
for step in range(2):
    opt.zero_grad()
    outs = model(torch.randn(4, 6))
    total = torch.tensor([F.mse_loss(o, target).item() for o in outs], requires_grad=True)  # C
    total.sum().backward()
    opt.step()
"""),
    # the BatchNorm layers of a backbone frozen by requires_grad, trained in train mode: their
    # running statistics keep moving (from chemprop_frozen_batchnorm_running_stats_*)
    "frozen_batchnorm_layers_in_train_mode": ("GT841", """
backbone = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.BatchNorm1d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten())
head = nn.Linear(4, 3)
for m in backbone.modules():
    if isinstance(m, nn.BatchNorm1d):
        for p in m.parameters():
            p.requires_grad = False  # C
opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.1)
for epoch in range(2):
    backbone.train()
    for _ in range(2):
        x, y = torch.randn(5, 2, 6) * 3 + 1, torch.randint(0, 3, (5,))
        opt.zero_grad()
        F.cross_entropy(head(backbone(x)), y).backward()
        opt.step()
"""),
}

LOOKALIKES = {
    # a whole stage frozen (conv and BatchNorm), trained in train mode: YOLO-style, the
    # statistics are left to adapt on purpose
    "frozen_stage_in_train_mode": """
backbone = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.BatchNorm1d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten())
head = nn.Linear(4, 3)
for p in backbone.parameters():
    p.requires_grad = False
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for epoch in range(2):
    backbone.train()
    for _ in range(2):
        x, y = torch.randn(5, 2, 6) * 3 + 1, torch.randint(0, 3, (5,))
        opt.zero_grad()
        F.cross_entropy(head(backbone(x)), y).backward()
        opt.step()
""",
    # the frozen backbone is also put in eval mode: its statistics stay fixed
    "frozen_backbone_batchnorm_in_eval_mode": """
backbone = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.BatchNorm1d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten())
head = nn.Linear(4, 3)
for p in backbone.parameters():
    p.requires_grad = False
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for epoch in range(2):
    head.train()
    backbone.eval()
    for _ in range(2):
        x, y = torch.randn(5, 2, 6) * 3 + 1, torch.randint(0, 3, (5,))
        opt.zero_grad()
        F.cross_entropy(head(backbone(x)), y).backward()
        opt.step()
""",
    # LBFGS closure done right
    "lbfgs_closure_with_backward": """
model = Net()
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
for x, y in batches():
    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss
    opt.step(closure)
""",
    # the body is frozen by parameter, the head alone trains (one optimizer over all)
    "body_frozen_head_trains": """
model = Net()
for p in model.body.parameters():
    p.requires_grad_(False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # the head is trained for one step, then frozen for good (a deliberate schedule)
    "frozen_for_good_after_first_step": """
model = Net()
opt_body = torch.optim.SGD(model.body.parameters(), lr=0.1)
opt_head = torch.optim.SGD(model.head.parameters(), lr=0.1)
for i, (x, y) in enumerate(batches(5)):
    opt_body.zero_grad()
    opt_head.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt_body.step()
    opt_head.step()
    if i == 0:
        model.head.requires_grad_(False)
""",
    # stages in a ModuleList, losses summed as tensors
    "stage_losses_summed": """
class Stages(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(6, 6) for _ in range(3))

    def forward(self, x):
        outs = []
        for b in self.blocks:
            x = x + b(x)
            outs.append(x)
        return outs

model = Stages()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
target = torch.zeros(4, 6)
for step in range(2):
    opt.zero_grad()
    outs = model(torch.randn(4, 6))
    total = torch.stack([F.mse_loss(o, target) for o in outs])
    total.sum().backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.findings
