"""Session-22 run-time readings on silent misses (docs/triage/runtime22a.md):

- GT505 (NOTE [running total of a returned loss]): ``total += step(...)`` where the step function
  backpropagated its loss and returned it with its graph: the ``return`` is named;
- GT874 (NOTE [dropout left on in evaluation]): a trained model with active dropout run over
  several batches whose outputs never reach a backward(), between optimizer steps (a
  validation without ``model.eval()``, with grad on or off): the loop over those batches;
- GT844 (NOTE [rewrapped loss term]): a loss term computed from ``torch.tensor([...])`` of
  tensors that require grad, added to a live loss (the parameters still get gradients from
  the other term, so GT820 has nothing to say): the copy is named;
- GT848 (NOTE [in-place on the caller's input], widened): an in-place activation held as
  ``self.<attr> = nn.ReLU(inplace=True)`` and run by the caller on a tensor it reads again: the
  constructor's line is named (it was only for a position in an ``nn.Sequential``).

Buggy twins in spellings other than the real-world cases (transformers' Trainer, iResNet,
ZOO-Attack's ``fit``, pulseq-zero's ``split_gradient``) and
look-alikes that stay silent. Real torch, in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(6)]
"""

RETURNED_BUGS = {
    # a plain step function, the total a float that becomes a tensor
    "function_step_returns_loss": """
def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss  # <- cause

model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running = 0.0
for epoch in range(2):
    for x, y in batches:
        running += train_step(model, opt, x, y)
print(float(running))
""",
    # a trainer class whose batch method returns the loss and the logits, the total on self
    "trainer_method_returns_tuple": """
class Runner:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        self.epoch_loss = torch.zeros(())

    def one_batch(self, x, y):
        logits = self.net(x)
        objective = F.cross_entropy(logits, y)
        self.opt.zero_grad()
        objective.backward()
        self.opt.step()
        return objective, logits  # <- cause

    def run_epoch(self):
        for x, y in batches:
            value, _ = self.one_batch(x, y)
            self.epoch_loss += value
        return self.epoch_loss

Runner(nn.Linear(6, 3)).run_epoch()
""",
}

RETURNED_LOOKALIKES = {
    # the fix: the step returns a detached loss
    "returns_detached": """
def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()

model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running = torch.zeros(())
for x, y in batches:
    running += train_step(model, opt, x, y)
""",
    # same shape, a sum of losses computed by a helper and backpropagated once per epoch
    "helper_terms_summed_then_one_backward": """
def term(model, x, y):
    return F.cross_entropy(model(x), y)

model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    total = torch.zeros(())
    for x, y in batches:
        total += term(model, x, y)
    opt.zero_grad()
    total.backward()
    opt.step()
""",
    # the step returns a float
    "returns_item": """
def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()

model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running = 0.0
for x, y in batches:
    running += train_step(model, opt, x, y)
""",
}

INPLACE_HEAD = """
import torch
import torch.nn as nn

torch.manual_seed(0)
x, y = torch.randn(8, 4, 6, 6), torch.randn(8, 1)
"""

INPLACE_BUGS = {
    # a pre-activation block: the shortcut reads x after the in-place activation rewrote it
    "preact_block_attribute_activation": """
class PreActBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.act = nn.ReLU(inplace=True)  # <- cause
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, inp):
        h = self.act(inp)
        h = self.conv(h)
        return h + inp

def train(model, steps=4):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

train(nn.Sequential(nn.Conv2d(4, 4, 1), PreActBlock(4), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                    nn.Linear(4, 1)))
""",
    # a leaky activation on a feature the module returns beside its projection
    "leaky_activation_feature_kept": """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(4, 4, 1)
        self.nonlin = nn.LeakyReLU(0.2, inplace=True)  # <- cause
        self.proj = nn.Linear(4 * 36, 1)

    def forward(self, images):
        feat = self.stem(images)
        pred = self.proj(self.nonlin(feat).flatten(1))
        return pred, feat.mean()

net = Head()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(4):
    pred, reg = net(x)
    loss = ((pred - y) ** 2).mean() + 0.1 * reg
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}

INPLACE_LOOKALIKES = {
    # the fix: not in place
    "activation_not_in_place": """
class PreActBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.act = nn.ReLU()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, inp):
        h = self.act(inp)
        return self.conv(h) + inp

model = nn.Sequential(nn.Conv2d(4, 4, 1), PreActBlock(4), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(3):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # in place, the result stored back into the name: the later reads want the new value
    "in_place_rebound": """
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.act = nn.ReLU(inplace=True)

    def forward(self, inp):
        inp = self.conv(inp)
        inp = self.act(inp)
        return inp + 1.0

model = nn.Sequential(Block(4), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(3):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


DROP_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
train_set = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(4)]
val_set = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(3)]

def mlp():
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 3))
"""

DROP_BUGS = {
    # a trainer class validating with grad on, the model never put in eval()
    "trainer_validates_with_grad_on": """
class Trainer:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def train_epoch(self):
        self.net.train()
        for xb, yb in train_set:
            loss = F.cross_entropy(self.net(xb), yb)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

    def validate(self):
        total = 0.0
        for xb, yb in val_set:  # <- cause
            total += F.cross_entropy(self.net(xb), yb).item()
        return total / len(val_set)

    def fit(self, epochs):
        for _ in range(epochs):
            self.train_epoch()
            print(self.validate())

Trainer(mlp()).fit(3)
""",
    # a script loop validating under no_grad, the model left in train mode
    "script_validates_under_no_grad": """
model = mlp()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(3):
    for x, y in train_set:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    correct = 0
    with torch.no_grad():  # <- cause
        for x, y in val_set:
            correct += (model(x).argmax(1) == y).sum().item()
    print(epoch, correct)
""",
}

DROP_LOOKALIKES = {
    # the fix: eval() for the validation, train() back for training
    "eval_before_validation": """
model = mlp()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    model.train()
    for x, y in train_set:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    val = sum(F.cross_entropy(model(x), y).item() for x, y in val_set)
""",
    # two views per step, one backward over both: every forward feeds training
    "two_views_one_backward": """
model = mlp()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for x, y in train_set:
        a = model(x + 0.1 * torch.randn_like(x))
        b = model(x + 0.1 * torch.randn_like(x))
        loss = F.cross_entropy(a, y) + F.mse_loss(a.softmax(1), b.softmax(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    # a target computed with the training model under no_grad once per step (DQN-style)
    "one_no_grad_target_per_step": """
model = mlp()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for x, y in train_set:
        with torch.no_grad():
            target = model(x + 1.0).max(1).values
        q = model(x).gather(1, y[:, None]).squeeze(1)
        loss = F.mse_loss(q, 0.5 * target)
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    # Monte-Carlo dropout after training: no optimizer step follows the sampling
    "mc_dropout_after_training": """
model = mlp()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y in train_set * 2:
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
with torch.no_grad():
    samples = torch.stack([model(val_set[0][0]).softmax(1) for _ in range(8)])
print(samples.std(0).mean().item())
""",
}


REWRAP_HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(32, 2), torch.randn(32, 1)
"""

REWRAP_BUGS = {
    # a module's property copies its parameters into a fresh tensor; a penalty on it
    "module_property_copied": """
class Box(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(1.5))
        self.h = nn.Parameter(torch.tensor(0.5))

    def corners(self):
        return torch.tensor([self.w * 2, self.h * 2])  # <- cause

    def forward(self, inp):
        return inp[:, :1] * self.w + inp[:, 1:] * self.h

box = Box()
opt = torch.optim.Adam(box.parameters(), lr=0.05)
for step in range(20):
    loss = F.mse_loss(box(x), y) + (box.corners().sum() - 2.0) ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a trainer reading its trained scalars by name from a registry
    "trainer_reads_scalars_by_name": """
class Fitter:
    names = ("offset", "gain")

    def __init__(self):
        self.net = nn.Linear(2, 1)
        self.offset = nn.Parameter(torch.tensor(0.1))
        self.gain = nn.Parameter(torch.tensor(0.8))
        self.opt = torch.optim.SGD([*self.net.parameters(), self.offset, self.gain], lr=0.01)

    def summary(self):
        values = [getattr(self, n) for n in self.names]
        return torch.tensor(values)  # <- cause

    def fit(self, steps=15):
        for _ in range(steps):
            pred = self.net(x) * self.gain + self.offset
            loss = F.mse_loss(pred, y) + 0.1 * (self.summary().sum() - 1.0) ** 2
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

Fitter().fit()
""",
}

REWRAP_LOOKALIKES = {
    # the fix: torch.stack keeps the graph
    "stacked_instead": """
w = nn.Parameter(torch.tensor(1.5))
h = nn.Parameter(torch.tensor(0.5))
opt = torch.optim.Adam([w, h], lr=0.05)
for step in range(20):
    corners = torch.stack([w * 2, h * 2])
    loss = F.mse_loss(x[:, :1] * w + x[:, 1:] * h, y) + (corners.sum() - 2.0) ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # the copy only feeds a logged total that no backward() reaches
    "copy_only_logged": """
w = nn.Parameter(torch.tensor(1.5))
opt = torch.optim.Adam([w], lr=0.05)
for step in range(20):
    loss = F.mse_loss(x[:, :1] * w, y)
    logged = loss.detach() + (torch.tensor([w * 2]).sum() - 2.0) ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


def _first(res):
    assert res.code == 0, res.err
    assert res.findings, res.err
    f = res.findings[0]
    return f["code"], f["line"], f["path"]


@pytest.mark.parametrize("name", sorted(RETURNED_BUGS))
def test_returned_loss_total_named(name, run_script):
    src = HEAD + RETURNED_BUGS[name]
    assert _first(run_script(src)) == ("GT505", marked_line(src), "prog.py")


@pytest.mark.parametrize("name", sorted(RETURNED_LOOKALIKES))
def test_returned_loss_lookalikes_silent(name, run_script):
    res = run_script(HEAD + RETURNED_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT505" not in res.codes(), res.findings


@pytest.mark.parametrize("name", sorted(INPLACE_BUGS))
def test_inplace_attribute_activation_named(name, run_script):
    src = INPLACE_HEAD + INPLACE_BUGS[name]
    assert _first(run_script(src)) == ("GT848", marked_line(src), "prog.py")


@pytest.mark.parametrize("name", sorted(INPLACE_LOOKALIKES))
def test_inplace_attribute_lookalikes_silent(name, run_script):
    res = run_script(INPLACE_HEAD + INPLACE_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT848" not in res.codes(), res.findings


# the cases the checker also sees: its finding leads, confirmed by GT874
DROP_STATIC_LEADS = {"script_validates_under_no_grad": "GT550"}


@pytest.mark.parametrize("name", sorted(DROP_BUGS))
def test_dropout_evaluation_named(name, run_script):
    """GT874 names the evaluation loop; where the checker sees the same evaluation (GT550 at its
    `no_grad` block: a script that never switches the model's mode), that finding leads,
    confirmed by GT874 (the two faces fused)."""
    src = DROP_HEAD + DROP_BUGS[name]
    res = run_script(src)
    expected = DROP_STATIC_LEADS.get(name, "GT874")
    assert _first(res) == (expected, marked_line(src), "prog.py")
    if expected != "GT874":
        assert "confirmed at run time (GT874)" in str(res.findings[0]), res.findings[0]


@pytest.mark.parametrize("name", sorted(DROP_LOOKALIKES))
def test_dropout_evaluation_lookalikes_silent(name, run_script):
    res = run_script(DROP_HEAD + DROP_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT874" not in res.codes(), res.findings


@pytest.mark.parametrize("name", sorted(REWRAP_BUGS))
def test_rewrapped_term_named(name, run_script):
    src = REWRAP_HEAD + REWRAP_BUGS[name]
    assert _first(run_script(src)) == ("GT844", marked_line(src), "prog.py")


@pytest.mark.parametrize("name", sorted(REWRAP_LOOKALIKES))
def test_rewrapped_term_lookalikes_silent(name, run_script):
    res = run_script(REWRAP_HEAD + REWRAP_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert "GT844" not in res.codes(), res.findings
