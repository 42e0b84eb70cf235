"""static29h (held-out 23's misses as mechanisms): each change as a buggy twin real torch shows
the bug on and a correct look-alike, through the checker and on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''
SAVED = (RuntimeError, "modified by an inplace operation")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT605, kaolin#832: a helper of the file multiplies its two arguments (`a * b` saves each
    # for the other's gradient), called with the written tensor twice; the written tensor's
    # graph comes from the caller's argument through helpers returning tuples (NOTE [graph
    # through helper returns]). Look-alike: the out-of-place division
    "helper-dot-of-itself": (Shape("""
        def _dot(a, b):
            return torch.sum(a * b, dim=-1, keepdim=True)

        def warp(direction, view):
            return direction - 2 * _dot(direction, view) * view, view

        def specular(normal, view):
            ndf_direction, _ = warp(normal, view)
            h = ndf_direction + view
            h = h / torch.sqrt(_dot(h, h))
            return h.sum()

        offset = nn.Parameter(torch.zeros(4, 3))
        view = torch.nn.functional.normalize(torch.randn(4, 3), dim=-1)
        normal = torch.nn.functional.normalize(torch.randn(4, 3) + offset, dim=-1)
        specular(normal, view).backward()
        """, "GT605", holds="offset.grad is not None"), Shape("""
        def _dot(a, b):
            return torch.sum(a * b, dim=-1, keepdim=True)

        def warp(direction, view):
            return direction - 2 * _dot(direction, view) * view, view

        def specular(normal, view):
            ndf_direction, _ = warp(normal, view)
            h = ndf_direction + view
            h /= torch.sqrt(_dot(h, h))
            return h.sum()

        offset = nn.Parameter(torch.zeros(4, 3))
        view = torch.nn.functional.normalize(torch.randn(4, 3), dim=-1)
        normal = torch.nn.functional.normalize(torch.randn(4, 3) + offset, dim=-1)
        specular(normal, view).backward()
        """, "GT605", 10, raises=SAVED)),
    # VARIANT: the product spelt inline (`h * h`) in a module's forward. Look-alike: a helper
    # that only sums (sum saves no input: trains)
    "inline-square-in-forward": (Shape("""
        def _total(v):
            return v.sum(-1, keepdim=True)

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 3)

            def forward(self, x):
                h = self.proj(x)
                h /= _total(h).abs() + 1
                return h

        head = Head()
        head(torch.randn(4, 3)).sum().backward()
        """, "GT605", holds="head.proj.weight.grad is not None"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 3)

            def forward(self, x):
                h = self.proj(x)
                h /= torch.sqrt((h * h).sum(-1, keepdim=True))
                return h

        head = Head()
        head(torch.randn(4, 3)).sum().backward()
        """, "GT605", 8, raises=SAVED)),
    # VARIANT: a method helper (`self._sq(h)` with `v.pow(2)`) and the `div_` spelling. Look-alike:
    # the helper's result detached (backward never reaches the pow)
    "method-helper-div-": (Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 3)

            def _sq(self, v):
                return v.pow(2).sum(-1, keepdim=True)

            def forward(self, x):
                h = self.proj(x)
                h.div_(torch.sqrt(self._sq(h)).detach())
                return h

        head = Head()
        head(torch.randn(4, 3)).sum().backward()
        """, "GT605", holds="head.proj.weight.grad is not None"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(3, 3)

            def _sq(self, v):
                return v.pow(2).sum(-1, keepdim=True)

            def forward(self, x):
                h = self.proj(x)
                h.div_(torch.sqrt(self._sq(h)))
                return h

        head = Head()
        head(torch.randn(4, 3)).sum().backward()
        """, "GT605", 11, raises=SAVED)),
    # VARIANT: `h ** 2`, the graph through a one-value helper return. Look-alike: the helper
    # detaches what it returns, so `h` has no graph and the write is harmless
    "power-through-helper-return": (Shape("""
        def shifted(x, by):
            return x.detach() + by

        def unit(x, by):
            h = shifted(x, by)
            h /= (h ** 2).sum(-1, keepdim=True).sqrt()
            return h

        w = nn.Parameter(torch.randn(4, 3))
        out = unit(w * 2, 1.0)
        (out.sum() + w.sum()).backward()
        """, "GT605", holds="w.grad is not None"), Shape("""
        def shifted(x, by):
            return x + by

        def unit(x, by):
            h = shifted(x, by)
            h /= (h ** 2).sum(-1, keepdim=True).sqrt()
            return h

        w = nn.Parameter(torch.randn(4, 3))
        unit(w * 2, 1.0).sum().backward()
        """, "GT605", 6, raises=SAVED)),
    # GT799, RTVC PR#678: a ReLU output divided by its own norm (a dead row: 0 / 0 = NaN).
    # Look-alike: the epsilon the fix adds
    "relu-embedding-over-own-norm": (Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(8, 4)
                self.relu = nn.ReLU()

            def forward(self, h):
                raw = self.relu(self.linear(h))
                return raw / (torch.norm(raw, dim=1, keepdim=True) + 1e-5)

        enc = Encoder()
        with torch.no_grad():
            enc.linear.bias.fill_(-10.0)
        out = enc(torch.randn(3, 8))
        out.sum().backward()
        """, "GT799", holds="not torch.isnan(out).any()"), Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = nn.Linear(8, 4)
                self.relu = nn.ReLU()

            def forward(self, h):
                raw = self.relu(self.linear(h))
                return raw / torch.norm(raw, dim=1, keepdim=True)

        enc = Encoder()
        with torch.no_grad():
            enc.linear.bias.fill_(-10.0)
        out = enc(torch.randn(3, 8))
        out.sum().backward()
        """, "GT799", 9, holds="torch.isnan(out).all()")),
    # VARIANT: `F.relu` then `x / x.norm(...)` in a training loop (`x /= x.norm(...)` is GT605's). Look-alike: a Linear output
    # (no exact zero row) over its norm
    "functional-relu-in-place-division": (Shape("""
        lin = nn.Linear(8, 4)
        for step in range(2):
            z = lin(torch.randn(3, 8))
            z = z / z.norm(dim=-1, keepdim=True)
            loss = z.sum()
            loss.backward()
        """, "GT799", holds="not torch.isnan(z).any()"), Shape("""
        lin = nn.Linear(8, 4)
        with torch.no_grad():
            lin.bias.fill_(-10.0)
        for step in range(2):
            z = torch.nn.functional.relu(lin(torch.randn(3, 8)))
            z = z / z.norm(dim=-1, keepdim=True)
            loss = z.sum()
            loss.backward()
        """, "GT799", 6, holds="torch.isnan(loss)")),
    # VARIANT: `clamp(min=0)` and `torch.linalg.vector_norm`. Look-alike: `F.normalize` (eps)
    "clamped-over-linalg-norm": (Shape("""
        w = nn.Parameter(torch.randn(4, 3) - 10.0)
        x = torch.randn(2, 4).abs()
        r = (x @ w).clamp(min=0)
        out = torch.nn.functional.normalize(r, dim=-1)
        out.sum().backward()
        """, "GT799", holds="not torch.isnan(out).any()"), Shape("""
        w = nn.Parameter(torch.randn(4, 3) - 10.0)
        x = torch.randn(2, 4).abs()
        r = (x @ w).clamp(min=0)
        out = r / torch.linalg.vector_norm(r, dim=-1, keepdim=True)
        out.sum().backward()
        """, "GT799", 4, holds="torch.isnan(out).all()")),
    # GT484, LaplaceNet#1: the semi-supervised phase nested under the supervised branch's
    # `if epoch < 10:` with `if epoch >= 10:` never runs. Look-alike: the two `if`s side by side
    "semi-phase-under-supervised-branch": (Shape("""
        calls = {"semi": 0}
        net = nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)

        def train_semi(x):
            calls["semi"] += 1
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()

        for epoch in range(4):
            if epoch < 2:
                opt.zero_grad()
                net(torch.randn(3, 4)).sum().backward()
            if epoch >= 2:
                train_semi(torch.randn(3, 4))
        """, "GT484", holds="calls['semi'] == 2"), Shape("""
        calls = {"semi": 0}
        net = nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)

        def train_semi(x):
            calls["semi"] += 1
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()

        for epoch in range(4):
            if epoch < 2:
                opt.zero_grad()
                net(torch.randn(3, 4)).sum().backward()
                if epoch >= 2:
                    train_semi(torch.randn(3, 4))
        """, "GT484", 15, holds="calls['semi'] == 0")),
    # VARIANT: the `else` branch of `if step < warmup:` (the step counts from `warmup`), a direct
    # `backward()` under `if step < 10` there. Look-alike: the name is reassigned in the branch
    "else-branch-and-reassigned-name": (Shape("""
        net = nn.Linear(4, 2)
        ran = []
        for step in range(20):
            if step < 10:
                pass
            else:
                step = step - 10
                if step < 5:
                    net(torch.randn(3, 4)).sum().backward()
                    ran.append(step)
        """, "GT484", holds="len(ran) == 5"), Shape("""
        net = nn.Linear(4, 2)
        ran = []
        for step in range(20):
            if step < 10:
                pass
            else:
                if step < 5:
                    net(torch.randn(3, 4)).sum().backward()
                    ran.append(step)
        """, "GT484", 7, holds="ran == []")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
