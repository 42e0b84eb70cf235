"""The facts of docs/triage/recall38b.md (session 38): an activation module a class is given
by its builders (NOTE [module given by the builder]) and a running sum that starts as an alias
of a saved output (NOTE [accumulator alias]) and the elements of a block that returns a tuple
(NOTE [tuple module results]), in-place writes spelt in a `return` statement or chained, and a product that saves its
other operand (NOTE [product saves the other operand]); new GT622 (NOTE [block writes its input]); new GT477 (NOTE [bias-selecting name list]); new GT558 (NOTE [start events]). Each pair is a correct shape the checker must
leave alone and a buggy twin it must report, written in other names and shapes than the
real-world cases; every snippet runs on real torch."""
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
    # a gated residual whose nonlinearity is handed in by the model that builds it, two levels
    # up. Look-alike: GELU saves its input, not its output: the in-place residual is fine
    "activation-given-by-the-builder": (Shape("""
        class Residual(nn.Module):
            def __init__(self, width, nonlin):
                super().__init__()
                self.proj = nn.Linear(width, width)
                self.nonlin = nonlin
            def forward(self, h):
                y = self.nonlin(self.proj(h))
                y += h
                return y
        class Tower(nn.Module):
            def __init__(self, width, nonlin):
                super().__init__()
                self.first = Residual(width, nonlin)
                self.head = nn.Linear(width, 1)
            def forward(self, h):
                return self.head(self.first(h))
        net = Tower(6, nn.GELU())
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        loss = net(torch.randn(3, 6)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT603", holds="net.first.proj.weight.grad is not None"), Shape("""
        class Residual(nn.Module):
            def __init__(self, width, nonlin):
                super().__init__()
                self.proj = nn.Linear(width, width)
                self.nonlin = nonlin
            def forward(self, h):
                y = self.nonlin(self.proj(h))
                y += h
                return y
        class Tower(nn.Module):
            def __init__(self, width, nonlin):
                super().__init__()
                self.first = Residual(width, nonlin)
                self.head = nn.Linear(width, 1)
            def forward(self, h):
                return self.head(self.first(h))
        net = Tower(6, nn.ReLU())
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        loss = net(torch.randn(3, 6)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT603", line=8, raises=INPLACE)),
    # several branches summed into a running total that starts as the first branch's output.
    # Look-alike: the total starts as a copy of it
    "running-sum-starts-as-first-output": (Shape("""
        branches = nn.ModuleList(nn.Linear(5, 5) for _ in range(3))
        opt = torch.optim.SGD(branches.parameters(), lr=0.1)
        x = torch.randn(4, 5)
        total = None
        for branch in branches:
            z = F.relu(branch(x))
            if total is None:
                total = z.clone()
            else:
                total += z
        opt.zero_grad()
        total.sum().backward()
        opt.step()
        """, "GT603", holds="branches[0].weight.grad is not None"), Shape("""
        branches = nn.ModuleList(nn.Linear(5, 5) for _ in range(3))
        opt = torch.optim.SGD(branches.parameters(), lr=0.1)
        x = torch.randn(4, 5)
        total = None
        for branch in branches:
            z = F.relu(branch(x))
            if total is None:
                total = z
            else:
                total += z
        opt.zero_grad()
        total.sum().backward()
        opt.step()
        """, "GT603", line=10, raises=INPLACE)),
    # a block returning two tensors, the caller scaling one of them in place.
    # Look-alike: the scaled one is the plain Linear output (addmm saves its inputs only)
    "tuple-element-of-a-block": (Shape("""
        class TwoHeads(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
                self.cls = nn.Linear(4, 3)
            def forward(self, x):
                feats = self.body(x)
                logits = self.cls(x)
                return feats, logits
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = TwoHeads()
            def forward(self, x):
                f, z = self.heads(x)
                z *= 0.5
                return f.sum(1) + z.sum(1)
        m = Model()
        m(torch.randn(2, 4)).sum().backward()
        """, "GT603", holds="m.heads.cls.weight.grad is not None"), Shape("""
        class TwoHeads(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
                self.cls = nn.Linear(4, 3)
            def forward(self, x):
                feats = self.body(x)
                logits = self.cls(x)
                return feats, logits
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = TwoHeads()
            def forward(self, x):
                f, z = self.heads(x)
                f *= 0.5
                return f.sum(1) + z.sum(1)
        m = Model()
        m(torch.randn(2, 4)).sum().backward()
        """, "GT603", line=16, raises=INPLACE)),
    # the same running sum inside a module's forward, over a block's results.
    # Look-alike: the sum is rebound out of place
    "running-sum-of-block-results": (Shape("""
        class Pyramid(nn.Module):
            def __init__(self):
                super().__init__()
                self.levels = nn.ModuleList(
                    nn.Sequential(nn.Linear(3, 3), nn.ReLU()) for _ in range(3))
            def forward(self, xs):
                for k, level in enumerate(self.levels):
                    y = level(xs[k])
                    if k == 0:
                        fused = y
                    else:
                        fused = fused + y
                return fused
        p = Pyramid()
        p([torch.randn(2, 3) for _ in range(3)]).sum().backward()
        """, "GT603", holds="p.levels[0][0].weight.grad is not None"), Shape("""
        class Pyramid(nn.Module):
            def __init__(self):
                super().__init__()
                self.levels = nn.ModuleList(
                    nn.Sequential(nn.Linear(3, 3), nn.ReLU()) for _ in range(3))
            def forward(self, xs):
                for k, level in enumerate(self.levels):
                    y = level(xs[k])
                    if k == 0:
                        fused = y
                    else:
                        fused += y
                return fused
        p = Pyramid()
        p([torch.randn(2, 3) for _ in range(3)]).sum().backward()
        """, "GT603", line=12, raises=INPLACE)),
    # a gate whose in-place scaling is the method's return statement.
    # Look-alike: the scaled copy is returned
    "in-place-write-in-a-return": (Shape("""
        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(5, 5)
            def forward(self, x):
                w = torch.sigmoid(self.score(x))
                return w * 2.0
        g = Gate()
        g(torch.randn(3, 5)).sum().backward()
        """, "GT602", holds="g.score.weight.grad is not None"), Shape("""
        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(5, 5)
            def forward(self, x):
                w = torch.sigmoid(self.score(x))
                return w.mul_(2.0)
        g = Gate()
        g(torch.randn(3, 5)).sum().backward()
        """, "GT602", line=7, raises=INPLACE)),
    # a self-gated activation helper returning its input multiplied in place by a function of
    # it. Look-alike: the product is made out of place
    "saved-input-written-in-a-return": (Shape("""
        def soft_gate(t):
            s = F.softplus(t)
            return t * s
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return soft_gate(self.fc(x))
        n = Net()
        n(torch.randn(2, 4)).sum().backward()
        """, "GT605", holds="n.fc.weight.grad is not None"), Shape("""
        def soft_gate(t):
            s = F.softplus(t)
            return t.mul_(s)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return soft_gate(self.fc(x))
        n = Net()
        n(torch.randn(2, 4)).sum().backward()
        """, "GT605", line=3, raises=INPLACE)),
    # a mask multiplied into a layer's result, then decayed in place (NOTE [product saves
    # the other operand]). Look-alike: the mask is multiplied into data only
    "product-saves-the-other-operand": (Shape("""
        class Dropper(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x, keep):
                m = (keep > 0).float()
                y = self.fc(x) + x * m
                m.mul_(0.5)
                return y.sum() + m.sum()
        d = Dropper()
        d(torch.randn(2, 4), torch.randn(2, 4)).backward()
        """, "GT605", holds="d.fc.weight.grad is not None"), Shape("""
        class Dropper(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x, keep):
                m = (keep > 0).float()
                y = self.fc(x) * m
                m.mul_(0.5)
                return y.sum() + m.sum()
        d = Dropper()
        d(torch.randn(2, 4), torch.randn(2, 4)).backward()
        """, "GT605", line=8, raises=INPLACE)),
    # the same write chained (`m.mul_(a).add_(b)`): the tensor written is the first receiver.
    # Look-alike: the chain starts on a copy
    "chained-in-place-write": (Shape("""
        class Smoother(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x, onehot):
                y = torch.tanh(self.fc(x)) * onehot
                soft = onehot.clone()
                soft.mul_(0.9).add_(0.025)
                return (y * soft).sum()
        s = Smoother()
        s(torch.randn(2, 4), torch.eye(4)[:2]).backward()
        """, "GT605", holds="s.fc.weight.grad is not None"), Shape("""
        class Smoother(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x, onehot):
                y = torch.tanh(self.fc(x)) * onehot
                onehot.mul_(0.9).add_(0.025)
                return (y * onehot).sum()
        s = Smoother()
        s(torch.randn(2, 4), torch.eye(4)[:2]).backward()
        """, "GT605", line=7, raises=INPLACE)),
    # a block that adds its bias into its input in place (NOTE [block writes its input]),
    # given a tensor the caller's norm layer read first. Look-alike: the norm reads it after
    # the block (it saves the written tensor, nothing is changed afterwards)
    "block-writes-an-input-the-caller-saved": (Shape("""
        class AddBias(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.b = nn.Parameter(torch.zeros(d))
            def forward(self, h):
                h += self.b
                return h
        class Mixer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.inp = nn.Linear(d, d)
                self.norm = nn.LayerNorm(d)
                self.shift = AddBias(d)
            def forward(self, x):
                h = self.inp(x)
                s = self.shift(h)
                n = self.norm(h)
                return s + n
        m = Mixer(4)
        m(torch.randn(2, 4)).sum().backward()
        """, "GT622", holds="m.inp.weight.grad is not None"), Shape("""
        class AddBias(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.b = nn.Parameter(torch.zeros(d))
            def forward(self, h):
                h += self.b
                return h
        class Mixer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.inp = nn.Linear(d, d)
                self.norm = nn.LayerNorm(d)
                self.shift = AddBias(d)
            def forward(self, x):
                h = self.inp(x)
                n = self.norm(h)
                s = self.shift(h)
                return s + n
        m = Mixer(4)
        m(torch.randn(2, 4)).sum().backward()
        """, "GT622", line=6, raises=INPLACE)),
    # parameter groups built from a no-decay name list (NOTE [bias-selecting name list]).
    # Look-alike: the matched names go to the group without decay; twin: to the decayed one
    "decay-groups-swapped": (Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))
        exempt = ("bias", "1.weight")
        groups = [
            {"params": [p for n, p in net.named_parameters()
                        if not any(e in n for e in exempt)], "weight_decay": 0.05},
            {"params": [p for n, p in net.named_parameters()
                        if any(e in n for e in exempt)], "weight_decay": 0.0},
        ]
        opt = torch.optim.AdamW(groups, lr=1e-3)
        """, "GT477", holds="all(p.dim() == 1 for p in opt.param_groups[1]['params'])"), Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))
        exempt = ("bias", "1.weight")
        groups = [
            {"params": [p for n, p in net.named_parameters()
                        if any(e in n for e in exempt)], "weight_decay": 0.05},
            {"params": [p for n, p in net.named_parameters()
                        if not any(e in n for e in exempt)], "weight_decay": 0.0},
        ]
        opt = torch.optim.AdamW(groups, lr=1e-3)
        """, "GT477", line=4, holds="all(p.dim() == 1 for p in opt.param_groups[0]['params'])")),
    # an event-driven trainer whose epoch-start handler steps the scheduler (NOTE [start
    # events]). Look-alike: the handler runs on epoch completion; the first epoch keeps lr 0.1
    "scheduler-stepped-on-epoch-start": (Shape("""
        class Events:
            EPOCH_STARTED, EPOCH_COMPLETED = "epoch_started", "epoch_completed"
        class Engine:
            def __init__(self, step):
                self.step, self.handlers = step, {}
            def on(self, event):
                def register(fn):
                    self.handlers.setdefault(event, []).append(fn)
                    return fn
                return register
            def run(self, data, epochs):
                for _ in range(epochs):
                    for fn in self.handlers.get(Events.EPOCH_STARTED, []):
                        fn(self)
                    for batch in data:
                        self.step(batch)
                    for fn in self.handlers.get(Events.EPOCH_COMPLETED, []):
                        fn(self)
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        seen = []
        def update(batch):
            opt.zero_grad()
            net(batch).pow(2).mean().backward()
            seen.append(opt.param_groups[0]["lr"])
            opt.step()
        trainer = Engine(update)
        @trainer.on(Events.EPOCH_COMPLETED)
        def decay(engine):
            sched.step()
        trainer.run([torch.randn(2, 3)] * 2, epochs=2)
        """, "GT558", holds="seen[0] == 0.1"), Shape("""
        class Events:
            EPOCH_STARTED, EPOCH_COMPLETED = "epoch_started", "epoch_completed"
        class Engine:
            def __init__(self, step):
                self.step, self.handlers = step, {}
            def on(self, event):
                def register(fn):
                    self.handlers.setdefault(event, []).append(fn)
                    return fn
                return register
            def run(self, data, epochs):
                for _ in range(epochs):
                    for fn in self.handlers.get(Events.EPOCH_STARTED, []):
                        fn(self)
                    for batch in data:
                        self.step(batch)
                    for fn in self.handlers.get(Events.EPOCH_COMPLETED, []):
                        fn(self)
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        seen = []
        def update(batch):
            opt.zero_grad()
            net(batch).pow(2).mean().backward()
            seen.append(opt.param_groups[0]["lr"])
            opt.step()
        trainer = Engine(update)
        @trainer.on(Events.EPOCH_STARTED)
        def decay(engine):
            sched.step()
        trainer.run([torch.randn(2, 3)] * 2, epochs=2)
        """, "GT558", line=31, holds="seen[0] == 0.05")),
    # precision gate (transformers' phimoe): the norm's output is rebound to the name the
    # block then writes; the norm saved the previous tensor. Look-alike only (its twin is the
    # pair above)
    "block-writes-the-rebound-norm-output": (Shape("""
        class Jitter(nn.Module):
            def forward(self, h):
                h *= 1.5
                return h
        class Layer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.fc = nn.Linear(d, d)
                self.jitter = Jitter()
            def forward(self, x):
                h = self.fc(x)
                h = self.norm(h)
                h = self.jitter(h)
                return h
        layer = Layer(4)
        layer(torch.randn(2, 4)).sum().backward()
        """, "GT622", holds="layer.fc.weight.grad is not None"), Shape("""
        class Jitter(nn.Module):
            def forward(self, h):
                h *= 1.5
                return h
        class Layer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.fc = nn.Linear(d, d)
                self.jitter = Jitter()
            def forward(self, x):
                h = self.fc(x)
                n = self.norm(h)
                h = self.jitter(h)
                return h + n
        layer = Layer(4)
        layer(torch.randn(2, 4)).sum().backward()
        """, "GT622", line=3, raises=INPLACE)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
