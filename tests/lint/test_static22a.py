"""Readings of docs/triage/static22a.md, written from each mechanism's sentence before reading
the code of the case it came from: buggy twins in several shapes (a script loop, a method of a
trainer class, a helper one call away, a Lightning module, another spelling of the API) that
real torch shows wrong, and correct look-alikes of the same shape that run; the checker
reports the first and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

INPLACE = (RuntimeError, "modified by an inplace operation")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT603, mechanism A: a method of a module class other than `forward`, run by the training
    # code (called per level from a script), writes in place into the result of a layer that
    # saved it. Look-alike: the out-of-place sum
    "method-per-level-script-loop": (Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
                self.cls = nn.Conv2d(4, 2, 1)
            def forward_single(self, x):
                feat = self.body(x)
                feat = feat + x
                return self.cls(feat)
        head = Head()
        loss = 0
        for f in [torch.randn(1, 4, 8, 8), torch.randn(1, 4, 4, 4)]:
            loss = loss + head.forward_single(f).mean()
        loss.backward()
        """, "GT603"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
                self.cls = nn.Conv2d(4, 2, 1)
            def forward_single(self, x):
                feat = self.body(x)
                feat += x
                return self.cls(feat)
        head = Head()
        loss = 0
        for f in [torch.randn(1, 4, 8, 8), torch.randn(1, 4, 4, 4)]:
            loss = loss + head.forward_single(f).mean()
        loss.backward()
        """, "GT603", 8, raises=INPLACE)),
    # GT602, the same in a helper method `forward` reaches through `self`, a sigmoid gate
    # scaled with `mul_`. Look-alike: `mul` out of place
    "helper-method-of-forward": (Shape("""
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
            def _gated(self, x):
                g = self.gate(x)
                g = g.mul(2.0)
                return g * x
            def forward(self, x):
                return self._gated(x).sum(-1)
        Gated()(torch.randn(3, 4)).mean().backward()
        """, "GT602"), Shape("""
        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Sequential(nn.Linear(4, 4), nn.Sigmoid())
            def _gated(self, x):
                g = self.gate(x)
                g.mul_(2.0)
                return g * x
            def forward(self, x):
                return self._gated(x).sum(-1)
        Gated()(torch.randn(3, 4)).mean().backward()
        """, "GT602", 7, raises=INPLACE)),
    # GT602, a trainer class runs `self.model.encode(x)` and backpropagates; `encode` masks
    # a tanh block's output by index. Look-alike: `encode` only called under no_grad
    # (feature extraction: nothing was saved)
    "encode-method-from-trainer-class": (Shape("""
        class AE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.dec = nn.Linear(4, 4)
            def encode(self, x):
                h = self.enc(x)
                h[:, 0] = 0.0
                return h
            def forward(self, x):
                return self.dec(x)
        class Trainer:
            def __init__(self):
                self.model = AE()
            def features(self, x):
                with torch.no_grad():
                    return self.model.encode(x)
        feats = Trainer().features(torch.randn(3, 4))
        """, "GT602"), Shape("""
        class AE(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.dec = nn.Linear(4, 4)
            def encode(self, x):
                h = self.enc(x)
                h[:, 0] = 0.0
                return h
            def forward(self, x):
                return self.dec(x)
        class Trainer:
            def __init__(self):
                self.model = AE()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            def step(self, x):
                loss = self.model.encode(x).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        Trainer().step(torch.randn(3, 4))
        """, "GT602", 8, raises=INPLACE)),
    # GT603, a Lightning module's training_step runs `self.embed(batch)`, which adds in place
    # to a ReLU block's output. Look-alike: the out-of-place add
    "lightning-training-step-helper": (Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                self.head = nn.Linear(4, 1)
            def embed(self, x):
                h = self.block(x)
                h = h + 1.0
                return h
            def training_step(self, batch, batch_idx):
                return self.head(self.embed(batch)).pow(2).mean()
        Lit().training_step(torch.randn(3, 4), 0).backward()
        """, "GT603"), Shape("""
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
                self.head = nn.Linear(4, 1)
            def embed(self, x):
                h = self.block(x)
                h += 1.0
                return h
            def training_step(self, batch, batch_idx):
                return self.head(self.embed(batch)).pow(2).mean()
        Lit().training_step(torch.randn(3, 4), 0).backward()
        """, "GT603", 9, raises=INPLACE)),
    # GT602, `forward` hands a per-level method to `map` (mmdet's multi_apply), which applies
    # an in-place ReLU to a ReLU block's output. Look-alike: the ReLU out of place
    "method-handed-to-map": (Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU(inplace=True))
            def forward_single(self, x):
                x = self.conv(x)
                x = F.relu(x)
                return x.mean()
            def forward(self, feats):
                return sum(map(self.forward_single, feats))
        Head()([torch.randn(1, 4, 4, 4), torch.randn(1, 4, 2, 2)]).backward()
        """, "GT602"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU(inplace=True))
            def forward_single(self, x):
                x = self.conv(x)
                x = F.relu(x, inplace=True)
                return x.mean()
            def forward(self, feats):
                return sum(map(self.forward_single, feats))
        Head()([torch.randn(1, 4, 4, 4), torch.randn(1, 4, 2, 2)]).backward()
        """, "GT602", 7, raises=INPLACE)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
