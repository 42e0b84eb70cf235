"""The facts widened or added for held-out batch 30 (docs/triage/ho30.md), each as a buggy twin
that is reported on its line and a silent look-alike, in other spellings than the cases'. Every
snippet runs on real torch, and ``holds`` checks what the finding claims."""
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
    # GT438: a head compared with a target but left out of the optimizer stays at its
    # initialisation; a critic the actor's loss climbs (NOTE [maximized module output]) is
    # meant to be outside the actor's optimizer
    "critic-maximized": (Shape("""
        actor = nn.Linear(4, 2)
        head = nn.Linear(2, 1)
        w0 = head.weight.detach().clone()
        opt = torch.optim.SGD(actor.parameters(), lr=0.1)
        for step in range(3):
            x, y = torch.randn(8, 4), torch.randn(8, 1)
            loss = F.mse_loss(head(actor(x)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT438", line=4, holds="torch.equal(head.weight, w0) and head.weight.grad is not None"),
        Shape("""
        actor = nn.Linear(4, 2)
        critic = nn.Bilinear(4, 2, 1)
        a0 = actor.weight.detach().clone()
        opt = torch.optim.SGD(actor.parameters(), lr=0.1)
        for step in range(3):
            obs = torch.randn(8, 4)
            q = critic(obs, torch.tanh(actor(obs)))
            loss = -q.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT438", holds="not torch.equal(actor.weight, a0)")),
    # GT505: a sum over a loader whose length is not the accumulation count grows with the
    # data; over exactly one accumulation window (NOTE [one accumulation window]) it keeps
    # `accum` graphs
    "one-accumulation-window": (Shape("""
        def micro_batches(seed, count):
            g = torch.Generator().manual_seed(seed)
            out = []
            for _ in range(count):
                out.append((torch.randn(2, 4, generator=g), torch.randn(2, 1, generator=g)))
            return out
        def train(model, accum, n_batches):
            running = 0
            for i, (x, y) in enumerate(micro_batches(0, n_batches)):
                loss = F.mse_loss(model(x), y)
                running += loss
                loss.backward()
                if (i + 1) % accum == 0:
                    for p in model.parameters():
                        p.grad /= accum
            return running
        total = train(nn.Linear(4, 1), 2, 6)
        """, "GT505", line=11, holds="total.grad_fn is not None"), Shape("""
        def micro_batches(seed, count):
            g = torch.Generator().manual_seed(seed)
            out = []
            for _ in range(count):
                out.append((torch.randn(2, 4, generator=g), torch.randn(2, 1, generator=g)))
            return out
        def train(model, accum):
            running = 0
            for i, (x, y) in enumerate(micro_batches(0, accum)):
                loss = F.mse_loss(model(x), y)
                running += loss
                loss.backward()
                if (i + 1) % accum == 0:
                    for p in model.parameters():
                        p.grad /= accum
            return running
        total = train(nn.Linear(4, 1), 2)
        """, "GT505")),
    # GT474: `nn.Parameter(w)` of a leaf that requires grad, handed to the optimizer, while the
    # loss reads `w` (NOTE [wrapped leaf handed away]); the look-alike computes with the
    # wrapper it keeps
    "leaf-wrapped-for-optimizer": (Shape("""
        def fit(x, y):
            w = torch.zeros(4, requires_grad=True)
            opt = torch.optim.SGD([nn.Parameter(w)], lr=0.1)
            for _ in range(3):
                opt.zero_grad()
                ((x @ w - y) ** 2).mean().backward()
                opt.step()
            return w
        w = fit(torch.randn(8, 4), torch.randn(8))
        """, "GT474", line=3, holds="bool((w == 0).all()) and w.grad is not None"), Shape("""
        def fit(x, y):
            w = torch.zeros(4, requires_grad=True)
            params = nn.ParameterList([w])
            opt = torch.optim.SGD(params, lr=0.1)
            for _ in range(3):
                opt.zero_grad()
                ((x @ params[0] - y) ** 2).mean().backward()
                opt.step()
            return params[0]
        w = fit(torch.randn(8, 4), torch.randn(8))
        """, "GT474", holds="not bool((w == 0).all())")),
    # GT729: a zeros parameter read only through `abs` (gradient 0 at 0: NOTE [flat at zero])
    # never moves; read through `clamp(min=0)`, whose backward passes the gradient at the
    # bound, it learns
    "flat-at-zero": (Shape("""
        class Gain(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.lin = nn.Linear(n, n)
                self.log_gain = nn.Parameter(torch.zeros(n))
            def forward(self, x):
                return self.lin(x) * (1 + self.log_gain.abs())
        net = Gain(4)
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            (net(torch.randn(8, 4)) - 3).pow(2).mean().backward()
            opt.step()
        """, "GT729", line=5, holds="bool((net.log_gain == 0).all())"), Shape("""
        class Gain(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.lin = nn.Linear(n, n)
                self.log_gain = nn.Parameter(torch.zeros(n))
            def forward(self, x):
                return self.lin(x) * (1 + self.log_gain.clamp(min=0))
        net = Gain(4)
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        for _ in range(5):
            opt.zero_grad()
            (net(torch.randn(8, 4)) - 3).pow(2).mean().backward()
            opt.step()
        """, "GT729", holds="not bool((net.log_gain == 0).all())")),
    # GT218 through a helper's return (NOTE [returned loss backpropagated by the caller]): the
    # adversarial term is scored under no_grad from the generator's output, and the caller
    # backpropagates the sum the helper returns; the look-alike takes only the target under
    # no_grad and scores the live output
    "no-grad-term-returned": (Shape("""
        def g_losses(gen, disc, z, real):
            fake = gen(z)
            rec = F.l1_loss(fake, real)
            with torch.no_grad():
                score = disc(fake)
            adv = F.mse_loss(score, torch.ones_like(score))
            return fake, rec + adv
        def step(gen, disc, z, real):
            fake, loss = g_losses(gen, disc, z, real)
            loss.backward()
        gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)
        z, real = torch.randn(8, 4), torch.randn(8, 4)
        step(gen, disc, z, real)
        g_all = gen.weight.grad.clone()
        gen.zero_grad()
        F.l1_loss(gen(z), real).backward()
        """, "GT218", line=4, holds="torch.allclose(g_all, gen.weight.grad)"), Shape("""
        def g_losses(gen, disc, z, real):
            fake = gen(z)
            rec = F.l1_loss(fake, real)
            with torch.no_grad():
                target = disc(real)
            adv = F.mse_loss(disc(fake), target)
            return fake, rec + adv
        def step(gen, disc, z, real):
            fake, loss = g_losses(gen, disc, z, real)
            loss.backward()
        gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)
        z, real = torch.randn(8, 4), torch.randn(8, 4)
        step(gen, disc, z, real)
        g_all = gen.weight.grad.clone()
        gen.zero_grad()
        F.l1_loss(gen(z), real).backward()
        """, "GT218", holds="not torch.allclose(g_all, gen.weight.grad)")),
    # GT546: one module object for two submodule slots of a file class (NOTE [one module in
    # two slots]): the two attributes are one object, its weights counted once; the look-alike
    # passes a deep copy
    "module-in-two-slots": (Shape("""
        import copy
        class Block(nn.Module):
            def __init__(self, pre, post):
                super().__init__()
                self.pre = pre
                self.post = post
            def forward(self, x):
                return self.post(torch.relu(self.pre(x)))
        proj = nn.Linear(8, 8)
        block = Block(pre=proj, post=proj)
        n = sum(p.numel() for p in block.parameters())
        """, "GT546", line=10, holds="block.pre is block.post and n == 72"), Shape("""
        import copy
        class Block(nn.Module):
            def __init__(self, pre, post):
                super().__init__()
                self.pre = pre
                self.post = post
            def forward(self, x):
                return self.post(torch.relu(self.pre(x)))
        proj = nn.Linear(8, 8)
        block = Block(pre=proj, post=copy.deepcopy(proj))
        n = sum(p.numel() for p in block.parameters())
        """, "GT546", holds="block.pre is not block.post and n == 144")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
