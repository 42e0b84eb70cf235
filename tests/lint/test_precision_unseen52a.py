"""Shapes from the projects of docs/triage/unseen52a.md (session 52), each in another
spelling than the project's and next to a buggy twin that is still reported (or, for the
recall shapes, now reported); the torch ones run on real torch."""
from __future__ import annotations

import importlib
import sys

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# a loop that unpacks the batch, sets the flag, then makes the name a non-leaf
UNPACK = '''
def shuffle(t):
    return t[torch.randperm(len(t))], torch.randn(len(t), 1)


net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
batches = [(torch.randn(2, 3), torch.randn(2, 1), i) for i in range(3)]
x = torch.randn(2, 3)
for data in batches:
    x, y, {rest} = {source}
    x.requires_grad = True
    x = x * 1.0
    loss = ((net(x) - y) ** 2).mean() + x.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

# a scheduler wrapper that steps the plateau with its metric where a flag says so
PLATEAU = '''
from torch.optim.lr_scheduler import ReduceLROnPlateau, StepLR


class Scheduler:
    def __init__(self, optimizer, kind):
        self.use_metric = False
        if kind == 'step':
            self.scheduler = StepLR(optimizer, step_size=1){flag_step}
        elif kind == 'plateau':
            self.scheduler = ReduceLROnPlateau(optimizer, 'min'){flag_plateau}

    def step(self, metric=None):
        if self.use_metric:
            self.scheduler.step(metric)
        else:
            self.scheduler.step()


opt = torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1)
sched = Scheduler(opt, 'plateau')
sched.step({metric})
'''

# d2l's `trainer` handed in; a scheduler stepped once an epoch after the batch loop
TRAIN = '''
def train_net(net, trainer, batches, epochs, scheduler=None):
    for epoch in range(epochs):
        for X, y in batches:
            l = F.mse_loss(net(X), y)
            trainer.zero_grad()
{order}
        if scheduler:
            scheduler.step()


net = nn.Linear(3, 1)
w0 = net.weight.detach().clone()
trainer = torch.optim.SGD(net.parameters(), lr=0.1)
train_net(net, trainer, [(torch.randn(4, 3), torch.randn(4, 1))] * 3, 2,
          torch.optim.lr_scheduler.StepLR(trainer, 1))
'''

# a training function handed the optimizer and the scheduler by its caller
HANDED = '''
def train(loader, model, optimizer, scheduler):
    model.train()
    for x, y in loader:
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
{update}


model = nn.Linear(3, 1)
w0 = model.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
train([(torch.randn(4, 3), torch.randn(4, 1))] * 3, model, optimizer, scheduler)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # ZIYU-DEEP/Generalization-and-Memorization-in-Sparse-Training: `inputs, y, _ = data`,
    # `inputs.requires_grad = True`, then `inputs = inputs.to(device)`; GT303 said the next
    # pass sets the flag on the non-leaf, but every pass unpacks a new batch first. Twin:
    # the unpacking reads the name itself (`x, *_ = shuffle(x)`): the second pass raises.
    "unpacked-afresh": (
        Shape(UNPACK.format(rest="_", source="data"), "GT303"),
        Shape(UNPACK.format(rest="*_", source="shuffle(x)"), "GT303", line=12,
              raises=(RuntimeError, "only change requires_grad flags of leaf"))),
    # mshalimay/Pruning-Lottery-Tickets-and-Early-Birds-with-Pytorch: the plateau's branch
    # sets `self.use_metric = True` and `step()` reads `if self.use_metric: step(metric)
    # else: step()`. Twin: the flag is set beside the StepLR (reported; raises TypeError).
    "flag-set-beside-the-build": (
        Shape(PLATEAU.format(flag_step="", flag_plateau="\n            self.use_metric = True",
                             metric="0.5"), "GT531"),
        Shape(PLATEAU.format(flag_step="\n            self.use_metric = True", flag_plateau="",
                             metric=""), "GT531", line=17,
              raises=(TypeError, "missing 1 required positional argument: 'metrics'"))),
    # recall (BeiYazi0/Dynamic-Sparse-Training, injected): `trainer.step()` moved before
    # `l.backward()`; the handed-in optimizer is spelled `trainer` and a scheduler steps after
    # the batch loop. Look-alike: the right order (silent); twin: reported, the weights stay.
    "trainer-stepped-before-backward": (
        Shape(TRAIN.format(order="            l.backward()\n            trainer.step()"),
              "GT522", holds="not torch.equal(net.weight, w0)"),
        Shape(TRAIN.format(order="            trainer.step()\n            l.backward()"),
              "GT522", line=6, holds="torch.equal(net.weight, w0)")),
    # recall (zhangxin-xd/Dataset-Pruning-TDDS, injected): `scheduler.step()` in place of
    # `optimizer.step()` in a train function its caller hands both. Twin: reported on the
    # first scheduler step, where the optimizer's belongs (both parameters' kinds come from
    # the one caller: NOTE [kinds by the callers]); look-alike: the optimizer is stepped.
    "handed-optimizer-never-stepped": (
        Shape(HANDED.format(update="        optimizer.step()\n        scheduler.step()"),
              "GT544", holds="not torch.equal(model.weight, w0)"),
        Shape(HANDED.format(update="        scheduler.step()\n        scheduler.step()"),
              "GT544", line=7, holds="torch.equal(model.weight, w0)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


def _package(tmp_path, name: str, files: dict[str, str]):  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for f, text in files.items():
        (pkg / f).write_text(text)
    return check_paths([str(pkg)], Settings()).findings


def _import(tmp_path, name: str, module: str):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(tmp_path))
    try:
        for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            sys.modules.pop(m)
        return importlib.import_module(f"{name}.{module}")
    finally:
        sys.path.remove(str(tmp_path))


# ChantalMP/Applying-SlowFast-networks-to-video-object-segmentation: the model's forward
# (another file) backpropagates inside and returns `(total_loss, detections)` with
# `total_loss += losses.item()`; the loop `model: Seg = Seg(...)` sums `batch_loss`. GT505
# read the first element as a tensor with its graph. Twin: the forward sums the loss tensor
# (reported in both files; the loop's sum is a tensor).
SEG = '''
import torch
import torch.nn as nn


class Seg(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, images, targets, optimizer):
        total_loss = 0.
        outs = []
        for x, y in zip(images, targets):
            out = self.fc(x)
            outs.append(out.detach())
            loss = ((out - y) ** 2).mean()
            total_loss += {term}
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        return (total_loss, outs)
'''

LOOP = '''
import torch
from .model import Seg


def main(loader):
    model: Seg = Seg()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        epoch_loss = 0.
        for imgs, targets in loader:
            batch_loss, _ = model(imgs, targets, optimizer=opt)
            epoch_loss += batch_loss
    return epoch_loss
'''


@pytest.mark.parametrize("term,lines", [
    ("loss.item()", []), ("loss", [("model.py", 18), ("train.py", 13)])],
    ids=["look-alike", "twin"])
def test_graphless_tuple_element_of_a_forward(tmp_path, term: str, lines: list) -> None:
    found = _package(tmp_path, "segpkg", {"model.py": SEG.replace("{term}", term),
                                          "train.py": LOOP})
    assert sorted((f.path.rpartition("/")[2], f.line) for f in found
                  if f.code == "GT505") == lines
    total = _import(tmp_path, "segpkg", "train").main(
        [([torch.randn(3)], [torch.randn(1)]) for _ in range(3)])
    assert isinstance(total, torch.Tensor) == bool(lines)


# recall (ChiWeiHsiao/DeepVO-pytorch, injected): `M_deepvo.conv1.requires_grad = False` in
# the script, `conv1` a module `DeepVO.__init__` builds in model.py. Look-alike: a tensor
# attribute (a leaf: the flag freezes it); twin: the submodule (reported; nothing frozen).
NET = '''
import torch
import torch.nn as nn


def conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3), nn.ReLU())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = conv(3, 4)
        self.scale = torch.ones(1)
        self.fc = nn.Linear(4, 2)
'''

MAIN = '''
import torch
from .model import Net


def build():
    net = Net()
    net.{attr}.requires_grad = False
    return net, torch.optim.Adam(net.parameters(), lr=0.001)
'''


@pytest.mark.parametrize("attr,lines", [("scale", []), ("conv1", [8])],
                         ids=["look-alike", "twin"])
def test_submodule_of_a_class_of_another_file(tmp_path, attr: str, lines: list) -> None:
    found = _package(tmp_path, "vopkg", {"model.py": NET, "main.py": MAIN.replace(
        "{attr}", attr)})
    assert sorted(f.line for f in found if f.code == "GT407") == lines
    net, _ = _import(tmp_path, "vopkg", "main").build()
    assert net.conv1[0].weight.requires_grad  # a plain attribute freezes nothing
