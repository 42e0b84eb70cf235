"""The facts widened for held-out batch 35 (docs/triage/ho35.md), each as a buggy twin that is
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
    # GT509: the int64 indices a module's forward returns beside a loss (the second of
    # `best, codes = torch.max(sims, dim=1)`) carry no history: a second pass that reads only
    # them does not run through the first loss's graph; one that reads the features does
    "returned-indices-carry-no-graph": (Shape("""
        class Tokenizer(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(6, 4)
                self.book = nn.Parameter(torch.randn(5, 4))
            def forward(self, x):
                h = torch.tanh(self.lin(x))
                sims = h @ self.book.t()
                best, codes = torch.max(sims, dim=1)
                return h, best.mean(), codes
        tok = Tokenizer()
        feats, score, codes = tok(torch.randn(8, 6))
        score.backward()
        (tok.book[codes] * feats).sum().backward()
        """, "GT509", line=13, raises=(RuntimeError, "backward through the graph a second")), Shape("""
        class Tokenizer(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(6, 4)
                self.book = nn.Parameter(torch.randn(5, 4))
            def forward(self, x):
                h = torch.tanh(self.lin(x))
                sims = h @ self.book.t()
                best, codes = torch.max(sims, dim=1)
                return h, best.mean(), codes
        tok = Tokenizer()
        feats, score, codes = tok(torch.randn(8, 6))
        score.backward()
        tok.book[codes].pow(2).sum().backward()
        ok = tok.book.grad is not None
        """, "GT509", holds="ok")),
    # GT509: `autograd.grad(loss, [head.weight])` runs only the nodes between the loss and that
    # weight (NOTE [grad inputs]): the trunk's nodes before the head keep their saved tensors,
    # unless a weight of the trunk is among the inputs
    "grad-on-module-weights-spares-the-trunk": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(5, 5)
                self.head = nn.Linear(5, 1)
        net = Net()
        head = net.head
        feats = torch.tanh(net.proj(torch.randn(4, 5)))
        score = head(feats).pow(2).mean()
        g_head, g_proj = torch.autograd.grad(score, [head.weight, net.proj.weight])
        total = feats.sum()
        total.backward()
        """, "GT509", line=10, raises=(RuntimeError, "backward through the graph a second")), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(5, 5)
                self.head = nn.Linear(5, 1)
        net = Net()
        head = net.head
        feats = torch.tanh(net.proj(torch.randn(4, 5)))
        score = head(feats).pow(2).mean()
        g_head, g_bias = torch.autograd.grad(score, [head.weight, head.bias])
        total = feats.sum()
        total.backward()
        ok = net.proj.weight.grad is not None
        """, "GT509", holds="ok")),
    # GT735: the VQ codebook and commitment terms, the encoder output told by the layer's
    # straight-through line (NOTE [vq loss terms]); the measurement reads the codebook term's
    # weight from its gradient
    "vq-commitment-weight-on-codebook-term": (Shape("""
        class Quantizer(nn.Module):
            def __init__(self, n, d, beta=0.25):
                super().__init__()
                self.codes = nn.Embedding(n, d)
                self.beta = beta
            def forward(self, latents):
                idx = torch.cdist(latents, self.codes.weight).argmin(dim=1)
                quant = self.codes(idx)
                vq_loss = F.mse_loss(quant.detach(), latents) + self.beta * torch.mean((quant - latents.detach()) ** 2)
                quant = latents + (quant - latents).detach()
                return quant, vq_loss
        vq = Quantizer(6, 3)
        lat = torch.randn(10, 3, requires_grad=True)
        _, vq_loss = vq(lat)
        vq_loss.backward()
        g_book = vq.codes.weight.grad.clone()
        vq.codes.weight.grad = None
        idx = torch.cdist(lat, vq.codes.weight).argmin(dim=1)
        torch.mean((vq.codes(idx) - lat.detach()) ** 2).backward()
        ratio = (g_book.norm() / vq.codes.weight.grad.norm()).item()
        """, "GT735", line=9, holds="abs(ratio - 0.25) < 1e-4"), Shape("""
        class Quantizer(nn.Module):
            def __init__(self, n, d, beta=0.25):
                super().__init__()
                self.codes = nn.Embedding(n, d)
                self.beta = beta
            def forward(self, latents):
                idx = torch.cdist(latents, self.codes.weight).argmin(dim=1)
                quant = self.codes(idx)
                vq_loss = F.mse_loss(quant.detach(), latents) * self.beta + torch.mean((quant - latents.detach()) ** 2)
                quant = latents + (quant - latents).detach()
                return quant, vq_loss
        vq = Quantizer(6, 3)
        lat = torch.randn(10, 3, requires_grad=True)
        _, vq_loss = vq(lat)
        vq_loss.backward()
        g_book = vq.codes.weight.grad.clone()
        vq.codes.weight.grad = None
        idx = torch.cdist(lat, vq.codes.weight).argmin(dim=1)
        torch.mean((vq.codes(idx) - lat.detach()) ** 2).backward()
        ratio = (g_book.norm() / vq.codes.weight.grad.norm()).item()
        """, "GT735", holds="abs(ratio - 1.0) < 1e-4")),
    # GT401: the container is one arm of a conditional expression whose other arm is None
    # (`[...] if option else None`): built when the option is on, and then as unregistered
    "container-in-conditional-expression": (Shape("""
        class Multi(nn.Module):
            def __init__(self, n_heads=0):
                super().__init__()
                self.trunk = nn.Linear(8, 8)
                self.heads = None if not n_heads else [nn.Linear(8, 2) for _ in range(n_heads)]
            def forward(self, x):
                h = self.trunk(x)
                return [head(h) for head in self.heads] if self.heads else [h]
        m = Multi(n_heads=3)
        ok = not any(p is m.heads[0].weight for p in m.parameters())
        """, "GT401", line=5, holds="ok"), Shape("""
        class Multi(nn.Module):
            def __init__(self, n_heads=0):
                super().__init__()
                self.trunk = nn.Linear(8, 8)
                self.heads = None if not n_heads else nn.ModuleList(
                    [nn.Linear(8, 2) for _ in range(n_heads)])
            def forward(self, x):
                h = self.trunk(x)
                return [head(h) for head in self.heads] if self.heads else [h]
        m = Multi(n_heads=3)
        ok = any(p is m.heads[0].weight for p in m.parameters())
        """, "GT401", holds="ok")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
