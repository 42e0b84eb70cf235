"""Shapes that fired wrongly on the projects of docs/triage/unseen14.md (session 14:
Graph-WaveNet, tabular-dl-revisiting-models, ppnp, deep_gcns_torch,
neural-combinatorial-rl-pytorch), each in another spelling than the project's and next to
a buggy twin that is still reported. Every snippet runs on real torch."""
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

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Graph-WaveNet: `nn.Parameter(torch.randn(n, 10).to(device), requires_grad=True)
    # .to(device)`: the data already has what the second move asks, so `.to()` returns the
    # Parameter itself (registered). Here the data is made with the dtype the move asks.
    # Twin: the data made in float32, the move to float64 is a real copy, not registered
    "move-to-what-the-data-already-has": (Shape("""
        class Graph(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.emb = nn.Parameter(torch.randn(n, 3, dtype=torch.float64)).to(torch.float64)
        g = Graph(5)
        """, "GT403", holds="len(list(g.parameters())) == 1"), Shape("""
        class Graph(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.emb = nn.Parameter(torch.randn(n, 3)).to(torch.float64)
        g = Graph(5)
        """, "GT403", 4, holds="len(list(g.parameters())) == 0")),
    "second-identical-cast": (Shape("""
        class Graph(nn.Module):
            def __init__(self, n, kind):
                super().__init__()
                self.emb = nn.Parameter(torch.randn(n, 3).to(dtype=kind)).to(dtype=kind)
        g = Graph(5, torch.float64)
        """, "GT403", holds="len(list(g.parameters())) == 1"), Shape("""
        class Graph(nn.Module):
            def __init__(self, n, kind):
                super().__init__()
                self.emb = nn.Parameter(torch.randn(n, 3).to(dtype=torch.float32)).to(dtype=kind)
        g = Graph(5, torch.float64)
        """, "GT403", 4, holds="len(list(g.parameters())) == 0")),
    # tabular-dl-revisiting-models: `while chunk_size != 0: try: optimizer.zero_grad(); ...
    # backward() ... except RuntimeError (out of memory): chunk_size //= 2; else: break`, then
    # `optimizer.step()`: the loop repeats only after a pass that raised, so the step applies
    # the one pass that finished. Here the `break` ends the `try` body. Twin: the same loop
    # over chunks without the break; the step applies the last chunk's gradient alone
    "retry-loop-that-breaks-after-its-backward": (Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def update(batch):
            tries = 0
            while True:
                try:
                    opt.zero_grad()
                    tries += 1
                    if tries == 1:
                        raise MemoryError("simulated")
                    loss = model(batch).pow(2).mean()
                    loss.backward()
                    break
                except MemoryError:
                    continue
            full = model.weight.grad.clone()
            opt.step()
            return tries, full
        x = torch.randn(8, 4)
        tries, full = update(x)
        """, "GT518", holds="tries == 2"), Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def update(batch):
            for chunk in batch.split(4):
                try:
                    opt.zero_grad()
                    loss = model(chunk).pow(2).mean()
                    loss.backward()
                except MemoryError:
                    continue
            applied = model.weight.grad.clone()
            opt.step()
            return applied
        x = torch.randn(8, 4)
        last = torch.autograd.grad(model(x[4:]).pow(2).mean(), model.weight)[0]
        applied = update(x)
        """, "GT518", 12, holds="torch.allclose(applied, last)")),
    # ppnp: `model = model_class(nfeatures, nclasses, **args).to(device)` before the loop,
    # the loss reading `model.reg_params` in it: the value is a model (it is called,
    # `model(attr, idx)`), not a tensor with a graph of its own. Here the class comes from
    # a builder function's argument and the loss reads the weight. Twin: the model's output
    # computed once before the loop; the second backward raises
    "model-built-from-a-class-argument": (Shape("""
        class Probe(nn.Linear):
            @property
            def decayed(self):
                return [self.weight]
        def fit(encoder_type, x, y, steps=3):
            encoder = encoder_type(4, 2)
            opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
            for _ in range(steps):
                opt.zero_grad()
                penalty = sum(torch.sum(w ** 2) for w in encoder.decayed)
                loss = F.cross_entropy(encoder(x), y) + 1e-3 * penalty
                loss.backward()
                opt.step()
            return encoder
        encoder = fit(Probe, torch.randn(6, 4), torch.randint(0, 2, (6,)))
        """, "GT507", holds="encoder.weight.grad is not None"), Shape("""
        class Probe(nn.Linear):
            @property
            def decayed(self):
                return [self.weight]
        def fit(encoder_type, x, y, steps=3):
            encoder = encoder_type(4, 2)
            opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
            out = encoder(x)
            for _ in range(steps):
                opt.zero_grad()
                penalty = sum(torch.sum(w ** 2) for w in encoder.decayed)
                loss = F.cross_entropy(out, y) + 1e-3 * penalty
                loss.backward()
                opt.step()
            return encoder
        encoder = fit(Probe, torch.randn(6, 4), torch.randint(0, 2, (6,)))
        """, "GT507", 8, raises=(RuntimeError, "backward through the graph a second time"))),
    # deep_gcns_torch (ppi): `scheduler = ReduceLROnPlateau(...)` then `opt.scheduler =
    # 'ReduceLROnPlateau'`, and `if opt.scheduler == 'ReduceLROnPlateau': scheduler.step(loss)
    # else: scheduler.step()`: the setting made with the build sends every run to the first
    # arm. Here a trainer's attribute, set in `__init__`, read in another method. Twin: the
    # setting names another kind; the `else` arm runs and raises
    "plateau-stepped-in-the-arm-its-setting-excludes": (Shape("""
        class Trainer:
            def __init__(self, net):
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, patience=0)
                self.kind = "plateau"
            def end_epoch(self, val_loss):
                if self.kind == "plateau":
                    self.sched.step(val_loss)
                else:
                    self.sched.step()
        t = Trainer(nn.Linear(2, 1))
        for v in (1.0, 2.0, 3.0):
            t.end_epoch(v)
        """, "GT531", holds="t.opt.param_groups[0]['lr'] < 0.1"), Shape("""
        class Trainer:
            def __init__(self, net):
                self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
                self.sched = torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt, patience=0)
                self.kind = "cosine"
            def end_epoch(self, val_loss):
                if self.kind == "plateau":
                    self.sched.step(val_loss)
                else:
                    self.sched.step()
        t = Trainer(nn.Linear(2, 1))
        for v in (1.0, 2.0, 3.0):
            t.end_epoch(v)
        """, "GT531", 10, raises=(TypeError, "metrics"))),
    # neural-combinatorial-rl-pytorch: `MultiStepLR(opt, range(int(args['actor_lr_decay_step']),
    # ...))` stepped on every batch of `for i in range(epoch, epoch + int(args['n_epochs']))`:
    # the milestones count steps; the two only share the mapping `args` and the callee `int`.
    # Twins: the period read from the epoch count itself; the rate decays within the first epoch
    "period-sharing-only-a-callee-with-the-epoch-loop": (Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        def train(n_epochs, decay_iters, batches):
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=int(decay_iters), gamma=0.5)
            for epoch in range(int(n_epochs)):
                for x in batches:
                    opt.zero_grad()
                    net(x).sum().backward()
                    opt.step()
                    sched.step()
        train(2, 8, [torch.randn(3, 2) for _ in range(4)])
        """, "GT526", holds="opt.param_groups[0]['lr'] == 0.5"), Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        def train(n_epochs, decay_iters, batches):
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=int(n_epochs) // 2, gamma=0.5)
            for epoch in range(int(n_epochs)):
                for x in batches:
                    opt.zero_grad()
                    net(x).sum().backward()
                    opt.step()
                    sched.step()
        train(2, 8, [torch.randn(3, 2) for _ in range(4)])
        """, "GT526", 10, holds="opt.param_groups[0]['lr'] == 0.5 ** 8")),
    "period-from-another-key-of-the-config": (Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        cfg = {"epochs": 2, "decay_every": 8}
        lrs = []
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[cfg["decay_every"]])
        for epoch in range(cfg["epochs"]):
            for x in [torch.randn(3, 2) for _ in range(4)]:
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
                sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        """, "GT526", holds="lrs == [1.0, 0.1]"), Shape("""
        net = nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        cfg = {"epochs": 2, "decay_every": 8}
        lrs = []
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[cfg["epochs"] // 2])
        for epoch in range(cfg["epochs"]):
            for x in [torch.randn(3, 2) for _ in range(4)]:
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
                sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        """, "GT526", 11, holds="lrs == [0.1, 0.1]")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
