"""Shapes from the projects of docs/triage/unseen55a.md (session 55), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

# a script whose train phase builds the optimizer, whose test phase builds the model alone
PHASES = '''
phase = "train"
if phase == "train":
    net = nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
{twin}else:
    net = nn.Linear(4, 2)
if phase == "train":
    before = net.weight.detach().clone()
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
'''

# DANN: the classifier's optimizer and the encoder's both over the network, each stepped
# after its own loss
DANN = '''
class DANN:
    def __init__(self):
        self.net = nn.Linear(4, 2)
        self.net_opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.enc_opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def train_epoch(self, batches):
        for x in batches:
            self.net_opt.zero_grad()
            self.net(x).pow(2).mean().backward()
            self.net_opt.step()
{clear}            self.net(x).abs().mean().backward()
            self.enc_opt.step()


t = DANN()
x = torch.randn(3, 4)
t.train_epoch([x])
'''

# a fixed sampling grid kept on a module, made from a Parameter and detached
GRID = '''
class Warp(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = nn.Parameter(torch.zeros(1, 2)).double(){d}


w = Warp()
'''

# torchmeta's meta-batch loss: each task of the batch handed in backwarded, the sum returned,
# the caller steps once per batch
TASKS = '''
class Learner:
    def __init__(self):
        self.model = nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def get_loss(self, tasks):
        mean_loss = torch.tensor(0.)
        for x, y in {walk}:
            loss = (self.model(x) - y).pow(2).mean()
            loss.backward()
            mean_loss += loss
        return mean_loss / 2

    def train(self, n):
        for _ in range(n):
            self.opt.zero_grad()
            xs, ys = torch.randn(4, 4), torch.randn(4, 1)
            self.get_loss({given})
            self.opt.step()


t = Learner()
t.train(3)
'''

SHAPES = {
    "optimizer-and-replacement-on-exclusive-arms": (
        Shape(PHASES.format(twin=""), "GT404", holds="not torch.equal(before, net.weight)"),
        Shape(PHASES.format(twin="    net = nn.Linear(4, 2)\n"), "GT404", line=5,
              holds="torch.equal(before, net.weight)")),
    "two-optimizers-each-stepped-after-its-own-backward": (
        Shape(DANN.format(clear="            self.enc_opt.zero_grad()\n"), "GT406",
              holds="t.net.weight.grad is not None"),
        Shape(DANN.format(clear=""), "GT406", line=5, holds="t.net.weight.grad is not None")),
    "tasks-of-one-batch-summed-per-call": (
        Shape(TASKS.format(walk="zip(*tasks)", given="(xs.split(2), ys.split(2))"), "GT505",
              holds="t.model.weight.grad is not None"),
        Shape(TASKS.format(walk="tasks", given="torch.utils.data.DataLoader("
                           "torch.utils.data.TensorDataset(xs, ys), batch_size=2)"), "GT505",
              line=11, holds="t.model.weight.grad is not None")),
    "moved-parameter-detached-into-a-constant": (
        Shape(GRID.format(d=".detach()"), "GT403",
              holds="not w.base.requires_grad and not list(w.parameters())"),
        Shape(GRID.format(d=""), "GT403", line=4,
              holds="w.base.grad_fn is not None and not list(w.parameters())")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


# an attack method whose batch every caller moves to the GPU first (checker only: no CUDA here;
# the CPU analogue is checked below)
ATTACK = '''
import torch
import torch.nn as nn


class Attack:
    def __init__(self, model):
        self.model = model

    def pgd(self, x_batch, y, steps):
        x = x_batch.clone().detach().requires_grad_(True).cuda()
        for _ in range(steps):
            self.model(x).sum().backward()
            x.data = x.data + 0.01 * x.grad.sign()
        return x

    def run(self, loader):
        for x, y in loader:
            x = x{move}
            self.pgd(x, y, 10)
'''


@pytest.mark.parametrize("move,line", [(".cuda()", None), ("", 11)])
def test_batch_handed_in_on_cuda(tmp_path, move: str, line: int | None) -> None:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_path / "attack.py").write_text(ATTACK.format(move=move))
    (tmp_path / "main.py").write_text("from attack import Attack\n")
    found = check_paths([str(tmp_path)], Settings(select=("GT305",))).findings
    assert [f.line for f in found] == ([] if line is None else [line])
    x = torch.rand(2, 3)  # a move to where the tensor is returns the leaf itself
    leaf = x.clone().detach().requires_grad_(True)
    assert leaf.cpu() is leaf and leaf.to("cpu") is leaf


# a mean-teacher step whose loss adds a Dice loss, an nn.Module of another file holding no weights
DICE = '''
import torch
import torch.nn as nn


class DiceLoss(nn.Module):
    def __init__(self, smooth=1):
        super().__init__()
        self.smooth = smooth

    def forward(self, preds, labels):
        inter = torch.sum(preds * labels)
        return 1 - (2 * inter + self.smooth) / (preds.sum() + labels.sum() + self.smooth)
'''

STEP = '''
import torch
import torch.nn as nn
from losses import DiceLoss


def train(loader, student, teacher, optimizer):
    mse = nn.MSELoss()
    seg = DiceLoss()
    for data, label in loader:
{student}
        teacher_pred = teacher(data).detach()
        loss = mse(student_pred, teacher_pred) + seg(student_pred, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


student, teacher = nn.Linear(4, 2), nn.Linear(4, 2)
opt = torch.optim.SGD(student.parameters(), lr=0.1)
train([(torch.randn(3, 4), torch.rand(3, 2))], student, teacher, opt)
'''


@pytest.mark.parametrize("student,line", [
    ("        student_pred = student(data)", None),
    ("        with torch.no_grad():\n            student_pred = student(data)", 11)])
def test_weightless_loss_module_of_another_file(tmp_imports, student: str,
                                                line: int | None) -> None:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_imports / "losses.py").write_text(DICE)
    src = STEP.format(student=student)
    (tmp_imports / "main.py").write_text(src)
    found = check_paths([str(tmp_imports)], Settings(select=("GT201",))).findings
    assert [f.line for f in found] == ([] if line is None else [line])
    if line is None:
        exec(compile(src, "main.py", "exec"), {})
    else:
        with pytest.raises(RuntimeError, match="does not require grad"):
            exec(compile(src, "main.py", "exec"), {})
