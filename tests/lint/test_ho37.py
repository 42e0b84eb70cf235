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
    # GT562: a loop over `modules()` that walks each module's recursive `named_parameters()`
    # and appends every one: the model (and each block with children) hands out its
    # children's tensors, which the loop meets again; the groups come back through a local
    # built from the lists. The look-alike asks for the module's own (`recurse=False`)
    "nested-loop-over-recursive-named-parameters": (Shape("""
        def split_decay(model):
            plain, decayed = [], []
            for m in model.modules():
                for pname, w in m.named_parameters():
                    if pname.endswith("bias"):
                        plain.append(w)
                    else:
                        decayed.append(w)
            groups = [{"params": plain, "weight_decay": 0.0}, {"params": decayed}]
            return groups
        net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
        sgd = torch.optim.SGD(split_decay(net), lr=0.1, weight_decay=1e-4)
        """, "GT562", line=4, holds="len(sgd.param_groups[0]['params']) == 4"), Shape("""
        def split_decay(model):
            plain, decayed = [], []
            for m in model.modules():
                for pname, w in m.named_parameters(recurse=False):
                    if pname.endswith("bias"):
                        plain.append(w)
                    else:
                        decayed.append(w)
            groups = [{"params": plain, "weight_decay": 0.0}, {"params": decayed}]
            return groups
        net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
        sgd = torch.optim.SGD(split_decay(net), lr=0.1, weight_decay=1e-4)
        """, "GT562", holds="len(sgd.param_groups[1]['params']) == 2")),
    # GT562: the same nested loop beside a branch that sends normalisation layers to the
    # other group: the model's recursive walk puts their weights in both groups (the crash);
    # the look-alike walks the layers' own parameters only
    "nested-loop-beside-a-norm-branch": (Shape("""
        def wd_groups(model, wd):
            no_wd, wd_params = [], []
            for sub in model.modules():
                if isinstance(sub, nn.LayerNorm):
                    no_wd += list(sub.parameters())
                    continue
                for _, t in sub.named_parameters():
                    wd_params.append(t)
            return [{"params": wd_params, "weight_decay": wd}, {"params": no_wd}]
        net = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 1))
        opt = torch.optim.AdamW(wd_groups(net, 0.01), lr=1e-3)
        """, "GT562", line=7, raises=(ValueError, "more than one parameter group")), Shape("""
        def wd_groups(model, wd):
            no_wd, wd_params = [], []
            for sub in model.modules():
                if isinstance(sub, nn.LayerNorm):
                    no_wd += list(sub.parameters())
                    continue
                for _, t in sub.named_parameters(recurse=False):
                    wd_params.append(t)
            return [{"params": wd_params, "weight_decay": wd}, {"params": no_wd}]
        net = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 1))
        opt = torch.optim.AdamW(wd_groups(net, 0.01), lr=1e-3)
        """, "GT562", holds="len(opt.param_groups[1]['params']) == 2")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
