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
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
