"""Shapes that fired wrongly on the projects of docs/triage/unseen39a.md (session 39), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # PointCLIP's Dassl (`dassl/engine/trainer.py`, `test`): `self.set_model_mode('eval')`, a
    # method that calls `self._models[name].eval()` over the models `register_model` stored:
    # the evaluation switches modes through a registry no name reaches. Twin: the helper only
    # logs, and batch norm's running statistics move toward the evaluation data
    "eval-mode-through-a-registry-helper": (Shape("""
        class Runner:
            def __init__(self):
                self._nets = {}
                self.net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
                self.keep("net", self.net)

            def keep(self, name, module):
                self._nets[name] = module

            def switch(self, mode="train"):
                for name in self._nets:
                    if mode == "train":
                        self._nets[name].train()
                    else:
                        self._nets[name].eval()

            def fit(self, batches):
                self.switch("train")
                for x, y in batches:
                    self.opt.zero_grad()
                    nn.functional.cross_entropy(self.net(x), y).backward()
                    self.opt.step()

            @torch.no_grad()
            def score(self, batches):
                self.switch("eval")
                hits = 0
                for x, y in batches:
                    hits += (self.net(x).argmax(1) == y).sum().item()
                return hits


        r = Runner()
        data = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]
        r.fit(data)
        before = r.net[1].running_mean.clone()
        r.score(data)
        same = torch.equal(before, r.net[1].running_mean)
        """, "GT540", holds="same"), Shape("""
        class Runner:
            def __init__(self):
                self._nets = {}
                self.net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
                self.keep("net", self.net)

            def keep(self, name, module):
                self._nets[name] = module

            def switch(self, mode="train"):
                for name in self._nets:
                    if mode == "train":
                        self._nets[name].train()
                    else:
                        print(name, "left as is")

            def fit(self, batches):
                self.switch("train")
                for x, y in batches:
                    self.opt.zero_grad()
                    nn.functional.cross_entropy(self.net(x), y).backward()
                    self.opt.step()

            @torch.no_grad()
            def score(self, batches):
                self.switch("eval")
                hits = 0
                for x, y in batches:
                    hits += (self.net(x).argmax(1) == y).sum().item()
                return hits


        r = Runner()
        data = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]
        r.fit(data)
        before = r.net[1].running_mean.clone()
        r.score(data)
        same = torch.equal(before, r.net[1].running_mean)
        """, "GT540", line=30, holds="not same")),
    # LAMDA-Tabular/TALENT (`bishop/entmax.py`, `EntmaxBisectFunction.backward`):
    # `torch.where(Y > 0, Y * torch.log(Y), ...)` inside a custom Function's backward, which
    # torch runs with grad off (no double backward): nothing there is differentiated. Twin:
    # the same selection in a plain helper on the graph: log's derivative at 0 makes NaN
    "where-log-in-a-custom-function-backward": (Shape("""
        class XLogX(torch.autograd.Function):
            @staticmethod
            def forward(ctx, p):
                ctx.save_for_backward(p)
                return torch.where(p > 0, p * p.clamp_min(1e-30).log(), p.new_zeros(1))

            @staticmethod
            def backward(ctx, g):
                (p,) = ctx.saved_tensors
                d = torch.where(p > 0, torch.log(p) + 1, p.new_zeros(1))
                return g * d


        lin = nn.Linear(4, 4)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        x = torch.randn(6, 4)
        p = torch.cat([torch.sigmoid(lin(x)), lin(x) * 0])
        XLogX.apply(p).sum().backward()
        finite = bool(torch.isfinite(lin.weight.grad).all())
        opt.step()
        """, "GT751", holds="finite"), Shape("""
        def xlogx(p):
            return torch.where(p > 0, p * torch.log(p), p.new_zeros(1))


        lin = nn.Linear(4, 4)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        x = torch.randn(6, 4)
        p = torch.cat([torch.sigmoid(lin(x)), lin(x) * 0])
        xlogx(p).sum().backward()
        finite = bool(torch.isfinite(lin.weight.grad).all())
        opt.step()
        """, "GT751", line=2, holds="not finite")),
    # chao1224/MoleculeSDE (`examples/finetune_MD17.py`): `-grad(energy, positions,
    # create_graph=True)[0].detach_()`: `torch.autograd.grad` returns a tuple, its `[0]` is the
    # gradient tensor itself, no view. Twin: an index of a tensor a torch function made
    "element-of-autograd-grad-detached-in-place": (Shape("""
        net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        pos = torch.randn(5, 3)
        pos.requires_grad_()
        energy = net(pos).sum()
        force = -torch.autograd.grad(energy, pos, grad_outputs=torch.ones_like(energy), create_graph=True)[0].detach_()
        """, "GT621", holds="not force.requires_grad"), Shape("""
        net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        pos = torch.randn(5, 3)
        pos.requires_grad_()
        energy = net(pos).sum()
        force = -torch.tanh(pos)[0].detach_()
        """, "GT621", line=5, raises=(RuntimeError, "detach views in-place"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
