"""Readings of docs/triage/static24a.md, each in spellings the real-world cases do not use, as a
buggy twin that real torch fails on (or computes the wrong thing with) and a correct
look-alike that runs; the checker reports the first and stays silent on the second."""
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

NOT_REQUIRING = (RuntimeError, "One of the differentiated Tensors does not require grad")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT706 widened: every parameter of a model with a pretrained (frozen by default)
    # embedding handed to autograd.grad in a helper. Look-alike: only the trainable ones
    "grad-over-frozen-pretrained-embedding": (Shape("""
        class Tagger(nn.Module):
            def __init__(self, vectors):
                super().__init__()
                self.lookup = nn.Embedding.from_pretrained(vectors)
                self.proj = nn.Linear(vectors.size(1), 3)
            def forward(self, tokens):
                return self.proj(self.lookup(tokens)).mean(1)
        def meta_grads(model, tokens, tags):
            loss = F.cross_entropy(model(tokens), tags)
            return torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad],
                                       create_graph=True)
        tagger = Tagger(torch.randn(20, 6))
        gs = meta_grads(tagger, torch.randint(0, 20, (4, 5)), torch.randint(0, 3, (4,)))
        """, "GT706", holds="len(gs) == 2"), Shape("""
        class Tagger(nn.Module):
            def __init__(self, vectors):
                super().__init__()
                self.lookup = nn.Embedding.from_pretrained(vectors)
                self.proj = nn.Linear(vectors.size(1), 3)
            def forward(self, tokens):
                return self.proj(self.lookup(tokens)).mean(1)
        def meta_grads(model, tokens, tags):
            loss = F.cross_entropy(model(tokens), tags)
            return torch.autograd.grad(loss, model.parameters(), create_graph=True,
                                       allow_unused=True)
        tagger = Tagger(torch.randn(20, 6))
        gs = meta_grads(tagger, torch.randint(0, 20, (4, 5)), torch.randint(0, 3, (4,)))
        """, "GT706", 4, raises=NOT_REQUIRING)),
    # GT706 widened: a constant scale kept as a Parameter that does not require grad
    # (a script, `tuple(...)` of the parameters). Look-alike: a buffer
    "grad-over-parameter-without-requires-grad": (Shape("""
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.register_buffer("gain", torch.full((4,), 2.0))
            def forward(self, x):
                return self.body(x) * self.gain
        net = Scaled()
        out = net(torch.randn(5, 4)).square().sum()
        gs = torch.autograd.grad(out, tuple(net.parameters()))
        """, "GT706", holds="len(gs) == 2"), Shape("""
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.gain = nn.Parameter(torch.full((4,), 2.0), requires_grad=False)
            def forward(self, x):
                return self.body(x) * self.gain
        net = Scaled()
        out = net(torch.randn(5, 4)).square().sum()
        gs = torch.autograd.grad(out, tuple(net.parameters()))
        """, "GT706", 5, raises=NOT_REQUIRING)),
    # GT206 widened: per-task gradients kept in a list, their norms penalised in a loop
    # (`extend`, `enumerate`, `zip`). Look-alike: create_graph=True
    "gradient-norm-penalty-through-list": (Shape("""
        net = nn.Linear(3, 1)
        tasks = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(2)]
        losses, per_task = [], []
        for x, y in tasks:
            l = F.mse_loss(net(x), y)
            losses.append(l)
            g = torch.autograd.grad(l, list(net.parameters()), create_graph=True)
            per_task.extend([g])
        total = torch.stack(losses).mean()
        spread = 0.0
        for i, gs in enumerate(per_task):
            for a, w in zip(gs, [1.0, 0.5]):
                spread = spread + w * a.pow(2).sum()
        (total + 10.0 * spread).backward()
        """, "GT206", holds="spread.requires_grad"), Shape("""
        net = nn.Linear(3, 1)
        tasks = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(2)]
        losses, per_task = [], []
        for x, y in tasks:
            l = F.mse_loss(net(x), y)
            losses.append(l)
            g = torch.autograd.grad(l, list(net.parameters()), retain_graph=True)
            per_task.append(g)
        total = torch.stack(losses).mean()
        spread = 0.0
        for gs in per_task:
            for a, w in zip(gs, [1.0, 0.5]):
                spread = spread + w * a.pow(2).sum()
        (total + 10.0 * spread).backward()
        """, "GT206", 7, holds="not spread.requires_grad")),
    # GT753 widened: an RMSE as the square root of a hand-written mean of squared
    # differences, zero when the model fits exactly. Look-alike: an epsilon inside the root
    "root-of-mean-squared-error": (Shape("""
        def rmse(pred, target):
            return (((pred - target) ** 2).mean() + 1e-12).sqrt()
        w = torch.zeros(2, requires_grad=True)
        x = torch.randn(6, 2)
        loss = rmse(x @ w, torch.zeros(6))
        loss.backward()
        """, "GT753", holds="torch.isfinite(w.grad).all()"), Shape("""
        def rmse(pred, target):
            return torch.sqrt(torch.mean((pred - target) ** 2))
        w = torch.zeros(2, requires_grad=True)
        x = torch.randn(6, 2)
        loss = rmse(x @ w, torch.zeros(6))
        loss.backward()
        """, "GT753", 2, holds="torch.isnan(w.grad).all()")),
    # GT753 widened: F.mse_loss under the root in a training loop. Look-alike: clamped at an
    # epsilon
    "root-of-functional-mse": (Shape("""
        net = nn.Linear(3, 1)
        nn.init.zeros_(net.weight); nn.init.zeros_(net.bias)
        x, y = torch.randn(4, 3), torch.zeros(4, 1)
        loss = F.mse_loss(net(x), y).clamp(min=1e-10).sqrt()
        loss.backward()
        """, "GT753", holds="torch.isfinite(net.weight.grad).all()"), Shape("""
        net = nn.Linear(3, 1)
        nn.init.zeros_(net.weight); nn.init.zeros_(net.bias)
        x, y = torch.randn(4, 3), torch.zeros(4, 1)
        loss = F.mse_loss(net(x), y).sqrt()
        loss.backward()
        """, "GT753", 4, holds="torch.isnan(net.weight.grad).all()")),
    # GT770: scores masked in place with an epsilon written for a large negative, then an
    # nn.Softmax module. Look-alike: a large negative
    "mask-fill-with-tiny-negative": (Shape("""
        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(4, 1)
                self.norm = nn.Softmax(dim=1)
            def forward(self, items, pad):
                s = self.score(items).squeeze(-1)
                s.masked_fill_(pad, -1e12)
                return self.norm(s)
        pad = torch.tensor([[False, False, True, True]])
        w = Pool()(torch.randn(1, 4, 4), pad)
        """, "GT770", holds="w[0, 2:].sum().item() == 0.0"), Shape("""
        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(4, 1)
                self.norm = nn.Softmax(dim=1)
            def forward(self, items, pad):
                s = self.score(items).squeeze(-1)
                s.masked_fill_(pad, -1e-12)
                return self.norm(s)
        pad = torch.tensor([[False, False, True, True]])
        w = Pool()(torch.randn(1, 4, 4), pad)
        """, "GT770", 8, holds="w[0, 2:].sum().item() > 0.2")),
    # GT770: the probabilities filled with -inf after F.softmax. Look-alike: zeroed and
    # renormalised
    "mask-fill-after-softmax": (Shape("""
        def mix(scores, values, keep):
            p = F.softmax(scores, dim=-1)
            p = p.masked_fill(~keep, 0.0)
            p = p / p.sum(-1, keepdim=True)
            return p @ values
        out = mix(torch.randn(2, 3), torch.randn(3, 5), torch.tensor([True, True, False]))
        """, "GT770", holds="torch.isfinite(out).all()"), Shape("""
        def mix(scores, values, keep):
            p = F.softmax(scores, dim=-1)
            p = p.masked_fill(~keep, -float("inf"))
            return p @ values
        out = mix(torch.randn(2, 3), torch.randn(3, 5), torch.tensor([True, True, False]))
        """, "GT770", 3, holds="not torch.isfinite(out).any()")),
    # GT714: a clipping hook on every parameter (enumerate over parameters()) of a model
    # whose encoder is frozen with requires_grad_(False). Look-alike: the hook skips frozen ones
    "hook-on-frozen-parameter": (Shape("""
        class Clipper:
            def __init__(self, limit):
                self.limit = limit
                self.handles = []
            def attach(self, model):
                for i, w in enumerate(model.parameters()):
                    if w.requires_grad:
                        self.handles.append(w.register_hook(lambda g: g.clamp(-self.limit, self.limit)))
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        net[0].requires_grad_(False)
        clip = Clipper(0.1)
        clip.attach(net)
        net(torch.randn(3, 4)).sum().backward()
        """, "GT714", holds="len(clip.handles) == 2"), Shape("""
        class Clipper:
            def __init__(self, limit):
                self.limit = limit
                self.handles = []
            def attach(self, model):
                for i, w in enumerate(model.parameters()):
                    self.handles.append(w.register_hook(lambda g: g.clamp(-self.limit, self.limit)))
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        net[0].requires_grad_(False)
        clip = Clipper(0.1)
        clip.attach(net)
        net(torch.randn(3, 4)).sum().backward()
        """, "GT714", 7, raises=(RuntimeError, "cannot register a hook on a tensor that "
                                             "doesn't require gradient"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
