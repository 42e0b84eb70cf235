"""The facts widened for held-out batch 28 (docs/triage/ho28.md), each as a buggy twin that is
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
    # GT620: a sparse matrix symmetrised in place with its own transpose (NOTE [own transpose
    # added in place]); the twin's values come from a learned edge weight, so the sparse
    # constructor's saved output is needed by backward; the look-alike's adjacency is data
    # (ones), no graph: the same write runs and is right
    "sparse-own-transpose": (Shape("""
        def adjacency(weight, edges, n):
            adj = torch.sparse_coo_tensor(edges, torch.sigmoid(weight), (n, n))
            adj.add_(adj.t())
            return adj
        edges = torch.tensor([[0, 1, 2], [1, 2, 0]])
        w = torch.zeros(3, requires_grad=True)
        x = torch.randn(3, 2)
        out = torch.sparse.mm(adjacency(w, edges, 3), x)
        out.pow(2).sum().backward()
        """, "GT620", line=3, raises=(RuntimeError, "modified by an inplace operation")), Shape("""
        def adjacency(edges, n):
            adj = torch.sparse_coo_tensor(edges, torch.ones(edges.shape[1]), (n, n))
            adj.add_(adj.t())
            return adj
        edges = torch.tensor([[0, 1, 2], [1, 2, 0]])
        lin = nn.Linear(2, 2)
        out = torch.sparse.mm(adjacency(edges, 3), lin(torch.randn(3, 2)))
        out.pow(2).sum().backward()
        dense = adjacency(edges, 3).to_dense()
        """, "GT620", holds="torch.equal(dense, dense.t()) and lin.weight.grad is not None")),
    # GT620 dense: `+=` of its own transpose on a dense tensor raises at once
    "dense-own-transpose": (Shape("""
        def gram(h):
            g = torch.matmul(h, h.new_ones(h.shape[1], h.shape[0]))
            g *= g.mT
            return g
        h = torch.randn(3, 3)
        gram(h)
        """, "GT620", line=3, raises=(RuntimeError, "single memory location")), Shape("""
        def gram(h):
            g = torch.matmul(h, h.new_ones(h.shape[1], h.shape[0]))
            g *= g.mT.clone()
            return g
        h = torch.randn(3, 3)
        g = gram(h)
        """, "GT620", holds="torch.allclose(g, g.t())")),
    # GT751 through a helper (NOTE [where branch built by a helper]) and under a constant shift
    # of a signed value (NOTE [signed value under a shift]): the twin's branch is a module-level
    # helper given a dot product, -1 for the second pair (sqrt(0) in the branch not taken); the
    # look-alike's helper clamps its input first
    "where-helper-branch": (Shape("""
        def upper(v):
            return torch.sqrt(v + 1.0)
        a = torch.tensor([[1.0, 0.0], [1.0, 0.0]], requires_grad=True)
        b = torch.tensor([[0.5, 0.0], [-1.0, 0.0]])
        c = (a * b).sum(-1)
        torch.where(c > 0, upper(c), c).sum().backward()
        """, "GT751", line=2, holds="torch.isnan(a.grad).any()"), Shape("""
        def upper(v):
            return torch.sqrt(torch.clamp(v + 1.0, min=1e-6))
        a = torch.tensor([[1.0, 0.0], [1.0, 0.0]], requires_grad=True)
        b = torch.tensor([[0.5, 0.0], [-1.0, 0.0]])
        c = (a * b).sum(-1)
        torch.where(c > 0, upper(c), c).sum().backward()
        """, "GT751", holds="torch.isfinite(a.grad).all()")),
    # the twin's shifted value is a dot product (-1 in the branch not taken); the look-alike's
    # cannot go below 0 (a sum of squares): the shift keeps the root finite
    "where-shift-nonneg": (Shape("""
        def score(a, b):
            c = torch.einsum("nd,nd->n", a, b)
            return torch.where(c > 0, torch.sqrt(c + 1.0), c)
        a = torch.tensor([[1.0, 0.0], [1.0, 0.0]], requires_grad=True)
        score(a, torch.tensor([[0.5, 0.0], [-1.0, 0.0]])).sum().backward()
        """, "GT751", line=3, holds="torch.isnan(a.grad).any()"), Shape("""
        def score(a):
            c = (a ** 2).sum(-1)
            return torch.where(c > 0, torch.sqrt(c + 1e-12), c)
        a = torch.tensor([[1.0, 0.0], [0.0, 0.0]], requires_grad=True)
        score(a).sum().backward()
        """, "GT751", holds="torch.isfinite(a.grad).all()")),
    # GT409 through a copy (NOTE [frozen values copied into a trainable parameter]): the
    # helper returns a Parameter it made frozen; the twin copies it under no_grad into a
    # Parameter built trainable, the look-alike's Parameter is built frozen
    "frozen-values-copied": (Shape("""
        def sinusoid(n, d):
            angles = torch.arange(n).float()[:, None] / (100 ** (torch.arange(d).float() / d))
            return nn.Parameter(torch.sin(angles), requires_grad=False)
        class Tokens(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.proj = nn.Linear(d, d)
                self.pe = nn.Parameter(torch.empty(n, d))
                with torch.no_grad():
                    self.pe.copy_(sinusoid(n, d))
            def forward(self, x):
                return self.proj(x) + self.pe
        m = Tokens(4, 8)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(torch.randn(2, 4, 8)).pow(2).mean().backward()
        opt.step()
        """, "GT409", line=10, holds="not torch.equal(m.pe, sinusoid(4, 8))"), Shape("""
        def sinusoid(n, d):
            angles = torch.arange(n).float()[:, None] / (100 ** (torch.arange(d).float() / d))
            return nn.Parameter(torch.sin(angles), requires_grad=False)
        class Tokens(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.proj = nn.Linear(d, d)
                self.pe = nn.Parameter(torch.empty(n, d), requires_grad=False)
                with torch.no_grad():
                    self.pe.copy_(sinusoid(n, d))
            def forward(self, x):
                return self.proj(x) + self.pe
        m = Tokens(4, 8)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(torch.randn(2, 4, 8)).pow(2).mean().backward()
        opt.step()
        """, "GT409", holds="torch.equal(m.pe, sinusoid(4, 8))")),
    # GT105 through a helper of the input (NOTE [input cut by a helper]): the helper crops
    # `x.data`; the twin's module runs after a Conv1d in a Sequential (that conv gets no
    # gradient), the look-alike's is the first layer, on data
    "input-cut-by-helper": (Shape("""
        def crop(x, n):
            return x.data[..., :n]
        class Cropped(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                x = crop(x, 4)
                return self.fc(x)
        model = nn.Sequential(nn.Conv1d(3, 3, 1), Cropped())
        model(torch.randn(2, 3, 6)).pow(2).mean().backward()
        """, "GT105", line=2, holds="model[0].weight.grad is None"), Shape("""
        def crop(x, n):
            return x.data[..., :n]
        class Cropped(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
            def forward(self, x):
                x = crop(x, 4)
                return self.fc(x)
        model = nn.Sequential(Cropped(), nn.Linear(2, 2))
        model(torch.randn(2, 3, 6)).pow(2).mean().backward()
        """, "GT105", holds="model[0].fc.weight.grad is not None")),
    # GT204 through a method of an instance (NOTE [inference method of an instance]): the
    # sampler is decorated with inference_mode; the twin trains on its ids, the look-alike
    # clones them outside inference mode first
    "inference-method-result": (Shape("""
        class Sampler(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb, self.out = nn.Embedding(10, 4), nn.Linear(4, 10)
            def forward(self, ids):
                return self.out(self.emb(ids))
            @torch.inference_mode()
            def sample(self, ids, steps):
                for _ in range(steps):
                    ids = torch.cat([ids, self(ids)[:, -1:].argmax(-1)], 1)
                return ids
        lm = Sampler()
        ids = lm.sample(torch.randint(0, 10, (2, 3)), 2)
        lm(ids).logsumexp(-1).mean().backward()
        """, "GT204", line=7, raises=(RuntimeError, "Inference tensors cannot be saved")), Shape("""
        class Sampler(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb, self.out = nn.Embedding(10, 4), nn.Linear(4, 10)
            def forward(self, ids):
                return self.out(self.emb(ids))
            @torch.inference_mode()
            def sample(self, ids, steps):
                for _ in range(steps):
                    ids = torch.cat([ids, self(ids)[:, -1:].argmax(-1)], 1)
                return ids
        lm = Sampler()
        ids = lm.sample(torch.randint(0, 10, (2, 3)), 2).clone()
        lm(ids).logsumexp(-1).mean().backward()
        """, "GT204", holds="lm.emb.weight.grad is not None")),
    # GT724 (NOTE [parameter behind a None gradient]): a PACT-style clip whose Function gives
    # no gradient to the clipping level; the twin's level is a Parameter handed down through a
    # helper (it never moves), the look-alike's is a buffer (fixed on purpose)
    "function-none-for-parameter": (Shape("""
        class Clip(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, alpha):
                ctx.save_for_backward(x, alpha)
                return torch.minimum(x.clamp(min=0), alpha)
            @staticmethod
            def backward(ctx, g):
                x, alpha = ctx.saved_tensors
                return g * ((x > 0) & (x < alpha)), None
        def pact(x, level):
            return Clip.apply(x, level)
        class Act(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc, self.alpha = nn.Linear(4, 4), nn.Parameter(torch.tensor(0.5))
            def forward(self, x):
                return pact(self.fc(x), self.alpha)
        m = Act()
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        m(torch.randn(16, 4)).sum().backward()
        opt.step()
        """, "GT724", line=11, holds="m.alpha.grad is None and m.alpha.item() == 0.5"), Shape("""
        class Clip(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, alpha):
                ctx.save_for_backward(x, alpha)
                return torch.minimum(x.clamp(min=0), alpha)
            @staticmethod
            def backward(ctx, g):
                x, alpha = ctx.saved_tensors
                return g * ((x > 0) & (x < alpha)), None
        def pact(x, level):
            return Clip.apply(x, level)
        class Act(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.register_buffer("alpha", torch.tensor(0.5))
            def forward(self, x):
                return pact(self.fc(x), self.alpha)
        m = Act()
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        m(torch.randn(16, 4)).sum().backward()
        opt.step()
        """, "GT724", holds="m.fc.weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
