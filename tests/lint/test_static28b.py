"""Readings of docs/triage/static28b.md (numerics, inplace, optimizer wiring...), each in
spellings the real-world cases do not hold, next to correct look-alikes that stay silent.
Every snippet runs on real torch."""
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

# (silent look-alike, buggy twin)
SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT764 (PyTorch-NLP attention: scores viewed to (batch * steps, keys), `nn.Softmax(dim=0)`,
    # viewed back and `bmm`): here a helper with `reshape` and `torch.matmul`, `F.softmax`.
    # Look-alike: the softmax over the last axis of the flattened scores
    "flattened-scores-softmax-over-rows-then-matmul": (Shape("""
        def mix(scores, values):
            b, h, n = scores.shape
            w = F.softmax(scores.reshape(b * h, n), dim=1).reshape(b, h, n)
            return torch.matmul(w, values), w
        out, w = mix(torch.randn(2, 3, 5), torch.randn(2, 5, 4))
        """, "GT764", holds="torch.allclose(w.sum(-1), torch.ones(2, 3))"), Shape("""
        def mix(scores, values):
            b, h, n = scores.shape
            w = F.softmax(scores.reshape(b * h, n), dim=0).reshape(b, h, n)
            return torch.matmul(w, values), w
        out, w = mix(torch.randn(2, 3, 5), torch.randn(2, 5, 4))
        """, "GT764", 3, holds="not torch.allclose(w.sum(-1), torch.ones(2, 3))")),
    # GT764: the same through names in a method, the module built in `__init__`; look-alike:
    # the module normalises the flattened rows' last axis
    "flattened-scores-module-softmax": (Shape("""
        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.Softmax(dim=1)
            def forward(self, s, v):
                b, n = s.shape[0], s.shape[-1]
                flat = s.view(b * n, n)
                a = self.norm(flat)
                a = a.view(b, n, n)
                return torch.bmm(a, v), a
        out, a = Pool()(torch.randn(2, 3, 3), torch.randn(2, 3, 4))
        """, "GT764", holds="torch.allclose(a.sum(-1), torch.ones(2, 3))"), Shape("""
        class Pool(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.Softmax(dim=0)
            def forward(self, s, v):
                b, n = s.shape[0], s.shape[-1]
                flat = s.view(b * n, n)
                a = self.norm(flat)
                a = a.view(b, n, n)
                return torch.bmm(a, v), a
        out, a = Pool()(torch.randn(2, 3, 3), torch.randn(2, 3, 4))
        """, "GT764", 4, holds="not torch.allclose(a.sum(-1), torch.ones(2, 3))")),
    # GT764 (soft-MoE dispatch: `logits.softmax(dim=0)` over the batch, then
    # `einsum("bnd,bnes->besd")`): here a slot pooling in a helper. Look-alikes: the softmax
    # over the summed axis, and soft assignment over clusters summed over descriptors
    # (NetVLAD: the normalised axis is in the result but not in the other operand)
    "einsum-softmax-over-batch-axis": (Shape("""
        def pool(x, logits):
            w = F.softmax(logits, dim=1)
            assign = torch.softmax(logits, dim=-1)
            v = torch.einsum("bnk,bnd->bkd", assign, x)
            return torch.einsum("bnk,bnd->bkd", w, x), w, v
        out, w, v = pool(torch.randn(2, 6, 4), torch.randn(2, 6, 3))
        """, "GT764", holds="torch.allclose(w.sum(1), torch.ones(2, 3))"), Shape("""
        def pool(x, logits):
            w = F.softmax(logits, dim=0)
            return torch.einsum("bnk,bnd->bkd", w, x), w
        out, w = pool(torch.randn(2, 6, 4), torch.randn(2, 6, 3))
        """, "GT764", 2, holds="not torch.allclose(w.sum(1), torch.ones(2, 3))")),
    # GT601 (SRGAN: `fake_out = netD(fake).mean()` kept by `d_loss.backward(retain_graph=
    # True)`, `optimizerD.step()`, then the generator loss reads `fake_out`): reported where
    # the kept value is read after the step. Here a trainer method with `self` models, the
    # stale value a critic score. Look-alike: the score is computed again after the step
    "kept-score-read-after-critic-step": (Shape("""
        class Trainer:
            def __init__(self):
                self.gen = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
                self.critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
                self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=1e-3)
                self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
            def step(self, z, real):
                fake = self.gen(z)
                score = self.critic(fake).mean()
                c_loss = score - self.critic(real).mean()
                self.opt_c.zero_grad()
                c_loss.backward(retain_graph=True)
                self.opt_c.step()
                score = self.critic(fake).mean()
                g_loss = -score
                self.opt_g.zero_grad()
                g_loss.backward()
                self.opt_g.step()
                return g_loss.item()
        out = Trainer().step(torch.randn(8, 4), torch.randn(8, 4))
        """, "GT601", holds="out == out"), Shape("""
        class Trainer:
            def __init__(self):
                self.gen = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
                self.critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
                self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=1e-3)
                self.opt_c = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
            def step(self, z, real):
                fake = self.gen(z)
                score = self.critic(fake).mean()
                c_loss = score - self.critic(real).mean()
                self.opt_c.zero_grad()
                c_loss.backward(retain_graph=True)
                self.opt_c.step()
                g_loss = -score
                self.opt_g.zero_grad()
                g_loss.backward()
                self.opt_g.step()
                return g_loss.item()
        out = Trainer().step(torch.randn(8, 4), torch.randn(8, 4))
        """, "GT601", 14, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT437 (two classifiers: `optimizer1.zero_grad(); optimizer2.zero_grad()`, both losses
    # backwarded, only `optimizer2.step()`; optimizer1 stepped nowhere): here a trainer class
    # with `self` optimizers, the encoder's optimizer cleared and never stepped. Look-alike:
    # both are stepped, in another method
    "cleared-together-one-never-stepped": (Shape("""
        class Trainer:
            def __init__(self):
                self.enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
                self.head = nn.Linear(8, 2)
                self.opt_enc = torch.optim.SGD(self.enc.parameters(), lr=0.1)
                self.opt_head = torch.optim.SGD(self.head.parameters(), lr=0.1)
            def update(self, x, y):
                self.opt_enc.zero_grad()
                self.opt_head.zero_grad()
                F.cross_entropy(self.head(self.enc(x)), y).backward()
                self.opt_head.step()
                self.finish()
            def finish(self):
                self.opt_enc.step()
        t = Trainer()
        w0 = t.enc[0].weight.detach().clone()
        t.update(torch.randn(8, 4), torch.randint(0, 2, (8,)))
        """, "GT437", holds="not torch.equal(w0, t.enc[0].weight)"), Shape("""
        class Trainer:
            def __init__(self):
                self.enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
                self.head = nn.Linear(8, 2)
                self.opt_enc = torch.optim.SGD(self.enc.parameters(), lr=0.1)
                self.opt_head = torch.optim.SGD(self.head.parameters(), lr=0.1)
            def update(self, x, y):
                self.opt_enc.zero_grad()
                self.opt_head.zero_grad()
                F.cross_entropy(self.head(self.enc(x)), y).backward()
                self.opt_head.step()
        t = Trainer()
        w0 = t.enc[0].weight.detach().clone()
        t.update(torch.randn(8, 4), torch.randint(0, 2, (8,)))
        """, "GT437", 11, holds="torch.equal(w0, t.enc[0].weight)")),
    # GT422 (run_squad: `sequence_output, _ = self.bert(ids)` in the QA head's forward, BERT's
    # pooler makes only the dropped output, then `param.grad.data / loss_scale` over every
    # parameter): here a backbone returning (features, projection), the projection dropped as
    # `_`, the gradients read in a helper's comprehension. Look-alike: the head uses both
    "submodule-output-dropped-in-forward": (Shape("""
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 8)
                self.proj = nn.Linear(8, 3)
            def forward(self, x):
                h = torch.relu(self.body(x))
                return h, self.proj(h)
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = Backbone()
                self.head = nn.Linear(8, 2)
            def forward(self, x):
                feats, emb = self.backbone(x)
                return self.head(feats) + emb.mean()
        def grad_norms(m):
            return {n: p.grad.norm() for n, p in m.named_parameters()}
        model = Classifier()
        model(torch.randn(5, 4)).sum().backward()
        norms = grad_norms(model)
        """, "GT422", holds="len(norms) == 6"), Shape("""
        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 8)
                self.proj = nn.Linear(8, 3)
            def forward(self, x):
                h = torch.relu(self.body(x))
                return h, self.proj(h)
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone = Backbone()
                self.head = nn.Linear(8, 2)
            def forward(self, x):
                feats, _ = self.backbone(x)
                return self.head(feats)
        def grad_norms(m):
            return {n: p.grad.norm() for n, p in m.named_parameters()}
        model = Classifier()
        model(torch.randn(5, 4)).sum().backward()
        norms = grad_norms(model)
        """, "GT422", 18, raises=(AttributeError, "'NoneType' object has no attribute 'norm'"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "buggy"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
