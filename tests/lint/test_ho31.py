"""The facts widened or added for held-out batch 31 (docs/triage/ho31.md), each as a buggy twin
that is reported on its line and a silent look-alike, in other spellings than the cases'. Every
snippet runs on real torch, and ``holds`` checks what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.distributed as dist
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT401: a layer bound once to a local of `__init__`, then appended to a plain list on
    # `self`, is not registered; gathered in a local list wrapped in `nn.ModuleList`, it is
    "local-layer-appended": (Shape("""
        class Bank(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.filters = []
                for i in range(n):
                    f = nn.Linear(4, 4)
                    self.filters.append(f)
            def forward(self, x):
                return sum(f(x) for f in self.filters)
        bank = Bank(3)
        """, "GT401", line=4, holds="len(list(bank.parameters())) == 0"), Shape("""
        class Bank(nn.Module):
            def __init__(self, n):
                super().__init__()
                filters = []
                for i in range(n):
                    f = nn.Linear(4, 4)
                    filters.append(f)
                self.filters = nn.ModuleList(filters)
            def forward(self, x):
                return sum(f(x) for f in self.filters)
        bank = Bank(3)
        """, "GT401", holds="len(list(bank.parameters())) == 6")),
    # GT708: under `isinstance(v, torch.Tensor)` the name is a tensor: `v.detach()` alone
    # leaves it on its graph; assigned, the kept value is cut
    "detach-under-tensor-check": (Shape("""
        def keep(value):
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                value.detach()
            return value
        lin = nn.Linear(2, 1)
        kept = keep(lin(torch.randn(3, 2)))
        """, "GT708", line=3, holds="kept.grad_fn is not None"), Shape("""
        def keep(value):
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                value = value.detach()
            return value
        lin = nn.Linear(2, 1)
        kept = keep(lin(torch.randn(3, 2)))
        """, "GT708", holds="kept.grad_fn is None")),
    # GT472: every parameter's gradient all-reduced with the default SUM and never divided;
    # divided by the world size afterwards, it is the mean (not called: no process group here)
    "gradients-summed": (Shape("""
        def average(model):
            for p in model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad.data)
        model = nn.Linear(2, 1)
        """, "GT472", line=4, holds="callable(average)"), Shape("""
        def average(model):
            for p in model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad.data)
                    p.grad.data /= dist.get_world_size()
        model = nn.Linear(2, 1)
        """, "GT472", holds="callable(average)")),
    # GT547: an override whose parent steps the optimizer calls `super()` only when an
    # optional object (default None) is set; called after the `if`, every path steps
    "parent-step-optional": (Shape("""
        class Base:
            def apply_update(self, optimizer):
                optimizer.step()
        class Runner(Base):
            def __init__(self, warmup=None):
                self.warmup = warmup
            def apply_update(self, optimizer):
                if self.warmup:
                    self.warmup.step()
                    super().apply_update(optimizer)
        model = nn.Linear(2, 1)
        w0 = model.weight.detach().clone()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(4, 2)).pow(2).mean().backward()
        Runner().apply_update(opt)
        """, "GT547", line=10, holds="torch.equal(model.weight, w0)"), Shape("""
        class Base:
            def apply_update(self, optimizer):
                optimizer.step()
        class Runner(Base):
            def __init__(self, warmup=None):
                self.warmup = warmup
            def apply_update(self, optimizer):
                if self.warmup:
                    self.warmup.step()
                super().apply_update(optimizer)
        model = nn.Linear(2, 1)
        w0 = model.weight.detach().clone()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(4, 2)).pow(2).mean().backward()
        Runner().apply_update(opt)
        """, "GT547", holds="not torch.equal(model.weight, w0)")),
    # GT473: the last `trainable` children unfrozen with `[-trainable:]`, default 0: all of
    # them; with the zero case guarded, none
    "last-zero-slice": (Shape("""
        def freeze_but_last(model, trainable=0):
            model.requires_grad_(False)
            for block in list(model.children())[-trainable:]:
                block.requires_grad_(True)
        net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        freeze_but_last(net)
        """, "GT473", line=3, holds="all(p.requires_grad for p in net.parameters())"), Shape("""
        def freeze_but_last(model, trainable=0):
            model.requires_grad_(False)
            if trainable > 0:
                for block in list(model.children())[-trainable:]:
                    block.requires_grad_(True)
        net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
        freeze_but_last(net)
        """, "GT473", holds="not any(p.requires_grad for p in net.parameters())")),
    # GT537: the loop clears the model only, the optimizer it is handed also holds a head's
    # group added by the subclass: the head's gradient adds up; cleared through the optimizer,
    # every group is
    "module-clear-added-groups": (Shape("""
        class Fit:
            def __init__(self, model):
                self.model = model
            def run(self, opt, steps):
                for _ in range(steps):
                    x = torch.randn(4, 2)
                    self.loss(x).backward()
                    opt.step()
                    self.model.zero_grad(set_to_none=True)
            def loss(self, x):
                return self.model(x).pow(2).mean()
        class HeadFit(Fit):
            def __init__(self, model):
                super().__init__(model)
                self.head = nn.Linear(1, 1)
            def loss(self, x):
                return self.head(self.model(x)).pow(2).mean()
            def run(self, opt, steps):
                opt.add_param_group({"params": list(self.head.parameters()), "lr": 0.0})
                super().run(opt, steps)
        fit = HeadFit(nn.Linear(2, 1))
        fit.run(torch.optim.SGD(fit.model.parameters(), lr=0.0), 3)
        g3 = fit.head.weight.grad.clone()
        fit.head.weight.grad = None
        fit.run(torch.optim.SGD(fit.model.parameters(), lr=0.0), 1)
        """, "GT537", line=9, holds="fit.model.weight.grad is None and not torch.allclose(g3, fit.head.weight.grad)"), Shape("""
        class Fit:
            def __init__(self, model):
                self.model = model
            def run(self, opt, steps):
                for _ in range(steps):
                    x = torch.randn(4, 2)
                    self.loss(x).backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            def loss(self, x):
                return self.model(x).pow(2).mean()
        class HeadFit(Fit):
            def __init__(self, model):
                super().__init__(model)
                self.head = nn.Linear(1, 1)
            def loss(self, x):
                return self.head(self.model(x)).pow(2).mean()
            def run(self, opt, steps):
                opt.add_param_group({"params": list(self.head.parameters()), "lr": 0.0})
                super().run(opt, steps)
        fit = HeadFit(nn.Linear(2, 1))
        fit.run(torch.optim.SGD(fit.model.parameters(), lr=0.0), 3)
        """, "GT537", holds="fit.head.weight.grad is None")),
    # GT472 through a list of gradients; a reduction over a process group (a model-parallel
    # mesh whose partial gradients are summed on purpose) is silent
    "gradients-summed-list": (Shape("""
        def sync(model):
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            for g in grads:
                dist.all_reduce(g, op=dist.ReduceOp.SUM)
        model = nn.Linear(2, 1)
        """, "GT472", line=4, holds="callable(sync)"), Shape("""
        def sync(model, group):
            for p in model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad, group=group)
        model = nn.Linear(2, 1)
        """, "GT472", holds="callable(sync)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
