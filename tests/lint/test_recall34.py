"""The facts widened by recall34 (docs/triage/recall34.md), each as a buggy twin that is
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
    # GT552 (NOTE [rows detached in forward]): the old rows of an embedding table are "kept"
    # by joining their `.detach()` with the live new rows; AdamW's default decay still moves
    # them. The look-alike gives AdamW weight_decay=0: the old rows get a zero gradient at
    # every step, so Adam's moments stay zero and they do not move.
    "embedding-rows-detached": (Shape("""
        class NewTokens(nn.Module):
            def __init__(self, n_old, n_new, d):
                super().__init__()
                self.n_old = n_old
                self.table = nn.Embedding(n_old + n_new, d)
            def forward(self, ids):
                old = self.table.weight[:self.n_old].detach()
                new = self.table.weight[self.n_old:]
                return F.embedding(ids, torch.cat([old, new]))
        m = NewTokens(6, 2, 4)
        start = m.table.weight[:6].detach().clone()
        opt = torch.optim.AdamW(m.parameters(), lr=0.1)
        for _ in range(3):
            m(torch.arange(8)).pow(2).sum().backward()
            assert m.table.weight.grad[:6].abs().sum() == 0
            opt.step()
            opt.zero_grad()
        """, "GT552", line=5, holds="not torch.allclose(m.table.weight[:6], start)"), Shape("""
        class NewTokens(nn.Module):
            def __init__(self, n_old, n_new, d):
                super().__init__()
                self.n_old = n_old
                self.table = nn.Embedding(n_old + n_new, d)
            def forward(self, ids):
                old = self.table.weight[:self.n_old].detach()
                new = self.table.weight[self.n_old:]
                return F.embedding(ids, torch.cat([old, new]))
        m = NewTokens(6, 2, 4)
        start = m.table.weight[:6].detach().clone()
        opt = torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.0)
        for _ in range(3):
            m(torch.arange(8)).pow(2).sum().backward()
            opt.step()
            opt.zero_grad()
        """, "GT552", holds="torch.equal(m.table.weight[:6], start)")),
    # GT552: a Parameter's columns, the pieces in a list bound to a name and added to another
    # (DyLoRA's spelling with SGD's coupled decay). The look-alike detaches the whole
    # Parameter: its gradient is None, and SGD skips it.
    "parameter-columns-detached": (Shape("""
        class Adapter(nn.Module):
            def __init__(self, d, r, k):
                super().__init__()
                self.k = k
                self.up = nn.Parameter(torch.randn(d, r))
            def forward(self, h):
                fixed = [self.up[:, :self.k].detach()]
                up = torch.cat(fixed + [self.up[:, self.k:]], dim=1)
                return h @ up
        a = Adapter(4, 3, 2)
        start = a.up[:, :2].detach().clone()
        opt = torch.optim.SGD(a.parameters(), lr=0.1, weight_decay=0.5)
        for _ in range(2):
            a(torch.ones(2, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
        """, "GT552", line=5, holds="not torch.allclose(a.up[:, :2], start)"), Shape("""
        class Adapter(nn.Module):
            def __init__(self, d, r):
                super().__init__()
                self.up = nn.Parameter(torch.randn(d, r))
                self.extra = nn.Parameter(torch.randn(d, 1))
            def forward(self, h):
                up = torch.cat([self.up.detach(), self.extra], dim=1)
                return h @ up
        a = Adapter(4, 3)
        start = a.up.detach().clone()
        opt = torch.optim.SGD(a.parameters(), lr=0.1, weight_decay=0.5)
        for _ in range(2):
            a(torch.ones(2, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
        """, "GT552", holds="a.up.grad is None and torch.equal(a.up, start)")),
    # GT552: the optimizer with decay must hold the class: the twin builds the adapters in a
    # ModuleList comprehension given to AdamW; the look-alike gives them to Adam without
    # decay (their fixed columns stay put) and decays another model.
    "decay-on-the-holder-only": (Shape("""
        class Adapter(nn.Module):
            def __init__(self, d, r, k):
                super().__init__()
                self.k = k
                self.up = nn.Parameter(torch.randn(d, r))
            def forward(self, h):
                return h @ torch.cat([self.up[:, :self.k].detach(), self.up[:, self.k:]], dim=1)
        parts = nn.ModuleList([Adapter(4, 3, 2) for _ in range(2)])
        start = parts[0].up[:, :2].detach().clone()
        opt = torch.optim.AdamW(parts.parameters(), lr=0.1)
        for _ in range(2):
            sum(p(torch.ones(2, 4)).sum() for p in parts).backward()
            opt.step()
            opt.zero_grad()
        """, "GT552", line=5, holds="not torch.allclose(parts[0].up[:, :2], start)"), Shape("""
        class Adapter(nn.Module):
            def __init__(self, d, r, k):
                super().__init__()
                self.k = k
                self.up = nn.Parameter(torch.randn(d, r))
            def forward(self, h):
                return h @ torch.cat([self.up[:, :self.k].detach(), self.up[:, self.k:]], dim=1)
        parts = nn.ModuleList([Adapter(4, 3, 2) for _ in range(2)])
        other = nn.Linear(4, 4)
        start = parts[0].up[:, :2].detach().clone()
        opt = torch.optim.Adam(parts.parameters(), lr=0.1)
        opt_other = torch.optim.AdamW(other.parameters(), lr=0.1)
        for _ in range(2):
            (sum(p(torch.ones(2, 4)).sum() for p in parts) + other(torch.ones(2, 4)).sum()).backward()
            opt.step()
            opt_other.step()
            opt.zero_grad()
            opt_other.zero_grad()
        """, "GT552", holds="torch.equal(parts[0].up[:, :2], start)")),
    # GT206: the gradient of the model's output matched to data (derivative matching: the
    # target is computed from the inputs before they are set to require grad) is the
    # prediction; without create_graph its term adds nothing to the weights' gradient. The
    # look-alike passes create_graph=True, and the term moves the first layer's gradient.
    "derivative-matched-to-data": (Shape("""
        from torch.autograd import grad
        net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        x = torch.randn(16, 2)
        y = torch.sin(x).sum(-1, keepdim=True)
        dy = torch.cos(x)
        x.requires_grad_(True)
        out = net(x)
        dx = grad(out.sum(), x, retain_graph=True)[0]
        loss = F.mse_loss(out, y) + F.mse_loss(dx, dy)
        loss.backward()
        g_fit = torch.autograd.grad(F.mse_loss(net(x), y), net[0].weight)[0]
        """, "GT206", line=8, holds="torch.allclose(net[0].weight.grad, g_fit)"), Shape("""
        from torch.autograd import grad
        net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        x = torch.randn(16, 2)
        y = torch.sin(x).sum(-1, keepdim=True)
        dy = torch.cos(x)
        x.requires_grad_(True)
        out = net(x)
        dx = grad(out.sum(), x, retain_graph=True, create_graph=True)[0]
        loss = F.mse_loss(out, y) + F.mse_loss(dx, dy)
        loss.backward()
        g_fit = torch.autograd.grad(F.mse_loss(net(x), y), net[0].weight)[0]
        """, "GT206", holds="not torch.allclose(net[0].weight.grad, g_fit)")),
    # GT206: a gradient compared with a teacher's detached output (no graph either way: the
    # term is a constant, and alone it cannot be backpropagated). The look-alike compares it
    # with a leaf that requires grad (a learned target): the term trains the leaf.
    "gradient-against-detached-or-leaf": (Shape("""
        from torch.autograd import grad
        net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        teacher = nn.Linear(2, 2)
        x = torch.randn(16, 2, requires_grad=True)
        dx = grad(net(x).sum(), x)[0]
        loss = F.mse_loss(dx, teacher(x).detach())
        loss.backward()
        """, "GT206", line=5, raises=(RuntimeError, "does not require grad")), Shape("""
        from torch.autograd import grad
        net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        x = torch.randn(16, 2, requires_grad=True)
        out = net(x)
        dx = grad(out.sum(), x)[0]
        dx_hat = torch.zeros(16, 2, requires_grad=True)
        loss = F.mse_loss(dx, dx_hat)
        loss.backward()
        """, "GT206", holds="dx_hat.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
