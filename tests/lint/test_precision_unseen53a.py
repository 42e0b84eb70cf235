"""Shapes from the projects of docs/triage/unseen53a.md (session 53), each in another
spelling than the project's and next to a buggy twin that is still reported; both run on
real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# a trainer class of the project's own (no Lightning) whose `training_step` runs its own
# backward and step, then returns the numbers it logs, computed under no_grad
OWN_STEP = '''
class Stepper:
    def __init__(self):
        self.net = nn.Linear(5, 3)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def training_step(self, batch, batch_idx):
        x, y = batch
{body}
batch = (torch.randn(6, 5), torch.randint(0, 3, (6,)))
out = Stepper().training_step(batch, 0)
'''
OWN = '''\
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            stats = {"acc": (logits.argmax(1) == y).float().mean().item()}
            stats["loss"] = loss.detach().item()
        return stats'''
# the twin: no backward of its own; the caller (Lightning's loop) backpropagates the return
RETURNED = '''\
        with torch.no_grad():
            logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        return loss'''

# the best model kept aside by a copy while the loop trains the original (recall: a
# commented-out zero_grad hid behind the copy); the look-alike trains a fresh copy each pass
BEST_COPY = '''
net = nn.Linear(4, 2)
batches = [(torch.ones(8, 4), torch.zeros(8, dtype=torch.long))] * 2
{setup}
best, best_score = None, -1.0
for i, (x, y) in enumerate(batches):
{body}
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if -loss.item() > best_score:
        best_score, best = -loss.item(), copy.deepcopy(model)
        snapshot = copy.deepcopy(model)
g1 = torch.autograd.grad(F.cross_entropy(net(batches[0][0]), batches[0][1]), net.weight)[0]
'''

SHAPES = {
    "snapshot-copy": (
        Shape(BEST_COPY.format(setup="", body="    model = copy.deepcopy(net)\n"
                               "    opt = torch.optim.SGD(model.parameters(), lr=0.0)"),
              "GT501", holds="torch.allclose(model.weight.grad, g1)"),
        Shape(BEST_COPY.format(setup="model = net\nopt = torch.optim.SGD(model.parameters(), lr=0.0)",
                               body="    # opt.zero_grad()"), "GT501", line=7,
              holds="torch.allclose(model.weight.grad, 2 * g1)")),
    "step-that-backpropagates-itself": (
        Shape(OWN_STEP.format(body=OWN), "GT201", holds="isinstance(out['loss'], float)"),
        Shape(OWN_STEP.format(body=RETURNED), "GT201", line=8,
              holds="not out.requires_grad")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
