"""The facts widened for held-out batch 27 (docs/triage/ho27.md), each as a buggy twin that is
reported on its line and a silent look-alike, in other spellings than the cases'. Every snippet
runs on real torch, and ``holds`` checks what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT501: the step is taken through a helper of the file (NOTE [step helper clears]); the
    # twin's helper only counts the steps, the look-alike's clears after stepping (lr 0: the
    # weights stay put, so the summed gradient is exactly three times one batch's)
    "step-helper-clears": (Shape("""
        class Engine:
            def __init__(self):
                self.steps = 0
            def optimizer_step(self, optimizer, model=None):
                optimizer.step()
                self.steps += 1
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        engine, x = Engine(), torch.ones(8, 4)
        for _ in range(3):
            loss = model(x).pow(2).mean()
            loss.backward()
            engine.optimizer_step(opt, model)
        one = torch.autograd.grad(model(x).pow(2).mean(), model.weight)[0]
        """, "GT501", line=12, holds="torch.allclose(model.weight.grad, 3 * one)"), Shape("""
        class Engine:
            def __init__(self):
                self.steps = 0
            def optimizer_step(self, optimizer, model=None):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                self.steps += 1
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        engine, x = Engine(), torch.ones(8, 4)
        for _ in range(3):
            loss = model(x).pow(2).mean()
            loss.backward()
            engine.optimizer_step(opt, model)
        """, "GT501", holds="model.weight.grad is None")),
    # GT462: a part whose class registers only buffers (`_modules.param_free_classes`);
    # the twin's part also holds an `nn.Parameter`, which the groups leave out
    "buffer-only-part": (Shape("""
        class Scale(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.register_buffer("mean", torch.zeros(dim))
                self.gain = nn.Parameter(torch.ones(dim))
            def forward(self, x):
                return (x - self.mean) * self.gain
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.scale = Scale(4)
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                return self.head(self.scale(self.body(x)))
        net = Net()
        opt = torch.optim.SGD([*net.body.parameters(), *net.head.parameters()], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT462", line=17, holds="torch.equal(net.scale.gain, torch.ones(4)) and "
                                      "net.scale.gain.grad is not None"), Shape("""
        class Scale(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.register_buffer("mean", torch.zeros(dim))
                self.register_buffer("std", torch.ones(dim))
            def forward(self, x):
                return (x - self.mean) / self.std
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.scale = Scale(4)
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                return self.head(self.scale(self.body(x)))
        net = Net()
        opt = torch.optim.SGD([*net.body.parameters(), *net.head.parameters()], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT462", holds="len(list(net.scale.parameters())) == 0 and "
                            "len(list(net.scale.buffers())) == 2")),
    # GT621: `detach_()` on a view (NOTE [sure views]): a helper of the file returns a view
    # of its argument; the look-alike copies the view first
    "detach-in-place-on-view": (Shape("""
        def heads(x):
            return x.unsqueeze(1)
        enc = nn.Linear(4, 4)
        h = heads(enc(torch.randn(2, 4)))
        h.detach_()
        """, "GT621", line=5, raises=(RuntimeError, "Can't detach views in-place")), Shape("""
        def heads(x):
            return x.unsqueeze(1)
        enc = nn.Linear(4, 4)
        h = heads(enc(torch.randn(2, 4))).clone()
        h.detach_()
        """, "GT621", holds="not h.requires_grad and h.grad_fn is None")),
    # GT120: a loss given the same value computed twice (NOTE [value computed twice]); the
    # look-alike computes the prediction from the student's output
    "loss-of-value-against-itself": (Shape("""
        teacher, student = nn.Linear(4, 3), nn.Linear(4, 3)
        x = torch.randn(8, 4)
        with torch.no_grad():
            t = teacher(x)
        s = student(x)
        target = F.normalize(t, dim=-1)
        pred = F.normalize(t, dim=-1)
        loss = F.mse_loss(pred, target) + 0.0 * s.sum()
        loss.backward()
        """, "GT120", line=7, holds="loss.item() == 0.0 and "
                                    "student.weight.grad.abs().sum().item() == 0.0"), Shape("""
        teacher, student = nn.Linear(4, 3), nn.Linear(4, 3)
        x = torch.randn(8, 4)
        with torch.no_grad():
            t = teacher(x)
        s = student(x)
        target = F.normalize(t, dim=-1)
        pred = F.normalize(s, dim=-1)
        loss = F.mse_loss(pred, target) + 0.0 * s.sum()
        loss.backward()
        """, "GT120", holds="student.weight.grad.abs().sum().item() > 0")),
    # GT601: the later backward's loss is a new name for a value built before the step
    # (`info_loss = Info_xz`): reported on the backward, the line to change; the look-alike's
    # value was built from the encoder's output detached, so its graph holds no stepped weight
    "kept-value-renamed-for-backward": (Shape("""
        enc = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        disc = nn.Linear(2, 1)
        opt_e = torch.optim.SGD(enc.parameters(), lr=0.1)
        z = enc(torch.randn(8, 4))
        score = disc(z).mean()
        main_loss = z.pow(2).mean() + score
        opt_e.zero_grad()
        main_loss.backward(retain_graph=True)
        opt_e.step()
        aux = score
        aux.backward()
        """, "GT601", line=11, raises=(RuntimeError, "modified by an inplace operation")),
        Shape("""
        enc = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        disc = nn.Linear(2, 1)
        opt_e = torch.optim.SGD(enc.parameters(), lr=0.1)
        z = enc(torch.randn(8, 4))
        score = disc(z.detach()).mean()
        main_loss = z.pow(2).mean() + score
        opt_e.zero_grad()
        main_loss.backward(retain_graph=True)
        opt_e.step()
        aux = score
        aux.backward()
        """, "GT601", holds="disc.weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
