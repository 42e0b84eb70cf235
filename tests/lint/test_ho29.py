"""The facts widened or added for held-out batch 29 (docs/triage/ho29.md), each as a buggy twin
that is reported on its line and a silent look-alike, in other spellings than the cases'. Every
snippet runs on real torch (DDP ones in a one-rank gloo group), and ``holds`` checks what the
finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import os, tempfile
import torch
import torch.nn as nn
import torch.distributed as dist
torch.manual_seed(0)
'''

# a one-rank process group for the DDP shapes, torn down at the end of the snippet
GROUP = '''
        store = tempfile.NamedTemporaryFile(delete=False).name
        dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT549: the optimizer's module is bound to every arm of `m.module if wrapped else m`; the
    # twin clips another module (the critic) before the actor's step
    "clip-ifexp-unwrapped": (Shape("""
        def train(actor, critic, wrapped, x):
            raw = actor.module if wrapped else actor
            opt = torch.optim.SGD(raw.parameters(), lr=0.1)
            opt.zero_grad()
            (actor(x).pow(2).sum() * 100).backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), 1.0)
            opt.step()
            return torch.cat([p.grad.reshape(-1) for p in raw.parameters()]).norm()
        norm = train(nn.Linear(4, 4), nn.Linear(4, 1), False, torch.randn(8, 4))
        """, "GT549", line=6, holds="norm > 1.0"), Shape("""
        def train(model, wrapped, x):
            raw = model.module if wrapped else model
            opt = torch.optim.SGD(raw.parameters(), lr=0.1)
            opt.zero_grad()
            (model(x).pow(2).sum() * 100).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return torch.cat([p.grad.reshape(-1) for p in raw.parameters()]).norm()
        norm = train(nn.Linear(4, 4), False, torch.randn(8, 4))
        """, "GT549", holds="norm <= 1.0 + 1e-5")),
    # GT542: the sync flag set between the forward and its backward; a comm hook counts the
    # all-reduces each micro-step's backward runs (NOTE [sync flag read at forward])
    "sync-flag-after-forward": (Shape(GROUP + """
        from torch.nn.parallel import DistributedDataParallel as DDP
        synced = []
        def hook(state, bucket):
            synced.append(step_micro[0])
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        net = DDP(nn.Linear(4, 1))
        net.register_comm_hook(None, hook)
        step_micro = [None]
        for i in range(2):
            out = net(torch.randn(3, 4)).sum() / 2
            net.require_backward_grad_sync = i == 1
            step_micro[0] = i
            out.backward()
        dist.destroy_process_group()
        """, "GT542", line=15, holds="synced == [0]"), Shape(GROUP + """
        from torch.nn.parallel import DistributedDataParallel as DDP
        synced = []
        def hook(state, bucket):
            synced.append(step_micro[0])
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        net = DDP(nn.Linear(4, 1))
        net.register_comm_hook(None, hook)
        step_micro = [None]
        for i in range(2):
            net.require_backward_grad_sync = i == 1
            out = net(torch.randn(3, 4)).sum() / 2
            step_micro[0] = i
            out.backward()
        net.require_backward_grad_sync = True
        dist.destroy_process_group()
        """, "GT542", holds="synced == [1]")),
    # GT452 through a setup method inherited and extended with super() (NOTE [wrapped by an
    # earlier method]); the look-alike wraps again after the freeze
    "freeze-after-inherited-wrap": (Shape(GROUP + """
        from torch.nn.parallel import DistributedDataParallel as DDP
        class Task:
            def __init__(self, model):
                self.model, self.ddp = model, None
            def setup(self):
                self._wrap()
            def _wrap(self):
                self.ddp = DDP(self.model)
        class FineTune(Task):
            def setup(self):
                super().setup()
                self.model.body.requires_grad_(False)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.head = nn.Linear(4, 4), nn.Linear(4, 1)
            def forward(self, x):
                return self.head(self.body(x))
        task = FineTune(Net())
        task.setup()
        try:
            for _ in range(2):
                task.ddp(torch.randn(2, 4)).sum().backward()
        finally:
            dist.destroy_process_group()
        """, "GT452", line=14, raises=(RuntimeError, "finished reduction")), Shape(GROUP + """
        from torch.nn.parallel import DistributedDataParallel as DDP
        class Task:
            def __init__(self, model):
                self.model, self.ddp = model, None
            def setup(self):
                self._wrap()
            def _wrap(self):
                self.ddp = DDP(self.model)
        class FineTune(Task):
            def setup(self):
                super().setup()
                self.model.body.requires_grad_(False)
                self._wrap()
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.head = nn.Linear(4, 4), nn.Linear(4, 1)
            def forward(self, x):
                return self.head(self.body(x))
        task = FineTune(Net())
        task.setup()
        try:
            for _ in range(2):
                task.ddp(torch.randn(2, 4)).sum().backward()
        finally:
            dist.destroy_process_group()
        ok = task.model.head.weight.grad is not None
        """, "GT452", holds="ok")),
    # GT728: a grad-mode object applied to a function as a statement (NOTE [grad-mode object
    # called on a function]); the look-alike calls the wrapped function
    "grad-mode-wrapper-discarded": (Shape("""
        calls = []
        def evaluate():
            calls.append(1)
        def run(fn):
            torch.no_grad()(fn)
        run(evaluate)
        """, "GT728", line=5, holds="calls == []"), Shape("""
        calls = []
        def evaluate():
            calls.append(torch.is_grad_enabled())
        def run(fn):
            torch.no_grad()(fn)()
        run(evaluate)
        """, "GT728", holds="calls == [False]")),
    # GT214: the optimizer is given a ModuleList holding the module whose forward is under
    # no_grad; the look-alike's module runs with grad
    "no-grad-forward-in-container": (Shape("""
        class Frontend(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x):
                with torch.no_grad():
                    y = self.proj(x)
                return y
        front, head = Frontend(), nn.Linear(4, 1)
        parts = nn.ModuleList([front, head])
        opt = torch.optim.SGD(parts.parameters(), lr=0.1)
        head(front(torch.randn(2, 4))).sum().backward()
        """, "GT214", line=6, holds="front.proj.weight.grad is None"), Shape("""
        class Frontend(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
            def forward(self, x):
                y = self.proj(x)
                return y
        front, head = Frontend(), nn.Linear(4, 1)
        parts = nn.ModuleList([front, head])
        opt = torch.optim.SGD(parts.parameters(), lr=0.1)
        head(front(torch.randn(2, 4))).sum().backward()
        """, "GT214", holds="front.proj.weight.grad is not None")),
    # GT543: two Parameters over one tensor share memory (NOTE [parameters over one tensor])
    "parameters-share-tensor": (Shape("""
        class Gate(nn.Module):
            def __init__(self, n):
                super().__init__()
                w = torch.ones(n)
                self.a = nn.Parameter(w)
                self.b = nn.Parameter(w)
            def forward(self, x):
                return x * self.a - self.b
        g = Gate(3)
        opt = torch.optim.SGD(g.parameters(), lr=0.1)
        g(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
        """, "GT543", line=6, holds="g.a.data_ptr() == g.b.data_ptr() and torch.equal(g.a, g.b)"),
        Shape("""
        class Gate(nn.Module):
            def __init__(self, n, frozen=False):
                super().__init__()
                w = torch.ones(n)
                if frozen:
                    self.a = nn.Parameter(w, requires_grad=False)
                else:
                    self.a = nn.Parameter(w)
                self.b = nn.Parameter(w.clone())
            def forward(self, x):
                return x * self.a - self.b
        g = Gate(3)
        opt = torch.optim.SGD(g.parameters(), lr=0.1)
        g(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
        """, "GT543", holds="not torch.equal(g.a, g.b)")),
    # GT512 pass function (NOTE [pass function]): the guard reads a name bound to a remainder
    # of a counter the class increments; the clear sits in a configuration branch
    "accumulation-clear-in-pass-method": (Shape("""
        class Trainer:
            def __init__(self, net, accum, clip):
                self.net, self.accum, self.clip, self.count = net, accum, clip, 0
                self.opt = torch.optim.SGD(net.parameters(), lr=0.0)
            def train_batch(self, x):
                step_now = self.count % self.accum == 0
                if self.clip:
                    self.opt.zero_grad()
                    (self.net(x).sum() / self.accum).backward()
                    if step_now:
                        self.opt.step()
                else:
                    (self.net(x).sum() / self.accum).backward()
                    if step_now:
                        self.opt.step()
                        self.opt.zero_grad()
            def fit(self, xs):
                for x in xs:
                    self.count += 1
                    self.train_batch(x)
        net = nn.Linear(2, 1, bias=False)
        xs = [torch.ones(1, 2), torch.ones(1, 2)]
        Trainer(net, 2, True).fit(xs)
        """, "GT512", line=8, holds="torch.allclose(net.weight.grad, torch.full((1, 2), 0.5))"),
        Shape("""
        class Trainer:
            def __init__(self, net, accum, clip):
                self.net, self.accum, self.clip, self.count = net, accum, clip, 0
                self.opt = torch.optim.SGD(net.parameters(), lr=0.0)
            def train_batch(self, x):
                step_now = self.count % self.accum == 0
                if self.clip:
                    (self.net(x).sum() / self.accum).backward()
                    if step_now:
                        self.opt.step()
                        self.opt.zero_grad()
                else:
                    (self.net(x).sum() / self.accum).backward()
                    if step_now:
                        self.opt.step()
                        self.opt.zero_grad()
            def fit(self, xs):
                for x in xs:
                    self.count += 1
                    self.train_batch(x)
        net = nn.Linear(2, 1, bias=False)
        xs = [torch.ones(1, 2), torch.ones(1, 2), torch.ones(1, 2)]
        Trainer(net, 2, True).fit(xs)
        """, "GT512", holds="torch.allclose(net.weight.grad, torch.full((1, 2), 0.5))")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
