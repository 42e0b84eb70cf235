"""The facts widened for held-out batch 37 (docs/triage/ho37.md), each as a buggy twin that is
reported on its line and a silent look-alike, in other spellings than the cases'. Every snippet
runs on real torch, and ``holds`` / ``raises`` check what the finding claims."""
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
    # GT443: the teacher put in eval mode when the distiller is built holds a BatchNorm, and
    # `train()` before the step switches it back (its running mean moves); the look-alike's
    # teacher holds only layers that read no `training` flag (NOTE [mode-free modules])
    "eval-undone-on-a-part-with-batchnorm": (Shape("""
        class Teacher(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
            def forward(self, x):
                return self.body(x)
        class Distiller(nn.Module):
            def __init__(self):
                super().__init__()
                self.teacher = Teacher()
                self.student = nn.Linear(4, 4)
                self.teacher.eval()
                self.teacher.requires_grad_(False)
            def forward(self, x):
                return F.mse_loss(self.student(x), self.teacher(x))
        d = Distiller()
        before = d.teacher.body[1].running_mean.clone()
        opt = torch.optim.SGD(d.student.parameters(), lr=0.1)
        for _ in range(2):
            d.train()
            d(torch.randn(8, 4) + 3).backward()
            opt.step()
        """, "GT443", line=20,
        holds="not torch.equal(before, d.teacher.body[1].running_mean)"), Shape("""
        class Teacher(nn.Module):
            def __init__(self, width=4):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, width), nn.LayerNorm(width), nn.GELU())
                self.out = nn.Linear(width, 4)
            def forward(self, x):
                return self.out(self.body(x).flatten(1))
        class Distiller(nn.Module):
            def __init__(self):
                super().__init__()
                self.teacher = Teacher()
                self.student = nn.Linear(4, 4)
                self.teacher.eval()
                self.teacher.requires_grad_(False)
            def forward(self, x):
                return F.mse_loss(self.student(x), self.teacher(x))
        d = Distiller()
        x = torch.randn(8, 4)
        d.teacher.eval()
        ref = d.teacher(x)
        opt = torch.optim.SGD(d.student.parameters(), lr=0.1)
        for _ in range(2):
            d.train()
            d(x).backward()
            opt.step()
        """, "GT443", holds="torch.equal(ref, d.teacher(x))")),
    # GT443: the part is a layer handed in (`self.encoder = encoder`): what it holds is not
    # shown, so the eval undone still counts; the look-alike builds a torch layer with no
    # mode switch right there
    "eval-undone-on-a-part-handed-in": (Shape("""
        class Probe(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.encoder = encoder
                self.head = nn.Linear(4, 2)
                self.encoder.eval()
                self.encoder.requires_grad_(False)
            def forward(self, x):
                return self.head(self.encoder(x))
        p = Probe(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)))
        opt = torch.optim.SGD(p.head.parameters(), lr=0.1)
        for _ in range(2):
            p.train()
            p(torch.randn(8, 4)).sum().backward()
            opt.step()
        """, "GT443", line=13, holds="p.encoder.training"), Shape("""
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Sequential(nn.Conv1d(1, 2, 3), nn.Flatten(), nn.Tanh())
                self.head = nn.Linear(4, 2)
                self.encoder.eval()
                self.encoder.requires_grad_(False)
            def forward(self, x):
                return self.head(self.encoder(x))
        p = Probe()
        opt = torch.optim.SGD(p.head.parameters(), lr=0.1)
        for _ in range(2):
            p.train()
            p(torch.randn(8, 1, 4)).sum().backward()
            opt.step()
        """, "GT443", holds="p.encoder.training")),
    # GT401: scorers kept in a plain list whose class does not freeze its weights: their
    # gradients are computed, never cleared by the holder's zero_grad and never stepped; the
    # look-alike's class freezes itself when built (NOTE [frozen when built])
    "plain-list-of-unfrozen-scorers": (Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 1)
            def forward(self, x):
                return self.net(x).mean()
        class Trainer(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.gen = nn.Linear(4, 4)
                self.scorers = [Scorer() for _ in range(n)]
            def forward(self, z):
                return sum(s(self.gen(z)) for s in self.scorers)
        t = Trainer(2)
        t(torch.randn(3, 4)).backward()
        t.zero_grad()
        """, "GT401", line=11,
        holds="len(list(t.parameters())) == 2 and t.scorers[0].net.weight.grad is not None"),
        Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 1)
                for p in self.net.parameters():
                    p.requires_grad = False
            def forward(self, x):
                return self.net(x).mean()
        class Trainer(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.gen = nn.Linear(4, 4)
                self.scorers = [Scorer() for _ in range(n)]
            def forward(self, z):
                return sum(s(self.gen(z)) for s in self.scorers)
        t = Trainer(2)
        t(torch.randn(3, 4)).backward()
        """, "GT401", holds="t.scorers[0].net.weight.grad is None and t.gen.weight.grad "
             "is not None")),
    # GT401: the class freezes only one of its two layers (or only under an `if`): the other
    # still trains, so the plain dict loses it; the look-alike freezes itself whole
    "plain-dict-of-partly-frozen-scorers": (Shape("""
        class Scorer(nn.Module):
            def __init__(self, frozen=True):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.proj = nn.Linear(4, 1)
                self.body.requires_grad_(False)
            def forward(self, x):
                return self.proj(self.body(x)).mean()
        class Trainer(nn.Module):
            def __init__(self, names):
                super().__init__()
                self.gen = nn.Linear(4, 4)
                self.scorers = {k: Scorer() for k in names}
            def forward(self, z):
                return sum(s(self.gen(z)) for s in self.scorers.values())
        t = Trainer(["a"])
        """, "GT401", line=13, holds="len(list(t.parameters())) == 2"), Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.proj = nn.Linear(4, 1)
                self.requires_grad_(False)
            def forward(self, x):
                return self.proj(self.body(x)).mean()
        class Trainer(nn.Module):
            def __init__(self, names):
                super().__init__()
                self.gen = nn.Linear(4, 4)
                self.scorers = {k: Scorer() for k in names}
            def forward(self, z):
                return sum(s(self.gen(z)) for s in self.scorers.values())
        t = Trainer(["a"])
        """, "GT401", holds="not any(p.requires_grad for s in t.scorers.values() "
             "for p in s.parameters())")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
