"""Readings of docs/triage/static24b.md, each in spellings the real-world cases do not use (a
hook method vs a helper function, a freeze by `requires_grad_(False)` or in a helper or in the
class's own `__init__`, `inputs=` by keyword), as a buggy twin that real torch fails on and a
correct look-alike that runs; the checker reports the first and stays silent on the second."""
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

HOOK_ERR = (RuntimeError, "cannot register a hook on a tensor that doesn't require gradient")
AUTOGRAD_ERR = (RuntimeError, "One of the differentiated Tensors does not require grad")
NONE_GRAD = (AttributeError, "'NoneType' object has no attribute")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT714 (the hook form of GT470's mechanism: one code, GT714's, reports it), a monitor
    # object hooks every parameter of the model it is given; the script froze the encoder
    # with `requires_grad_(False)` before. Look-alike: the monitor skips frozen ones
    "hook-every-parameter-of-partly-frozen-model": (Shape("""
        class GradMonitor:
            def __init__(self):
                self.norms = {}
            def attach(self, net):
                for name, p in net.named_parameters():
                    if not p.requires_grad:
                        continue
                    p.register_hook(lambda g, name=name: self.norms.__setitem__(name, g.norm()))
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        model[0].requires_grad_(False)
        mon = GradMonitor()
        mon.attach(model)
        model(torch.randn(3, 4)).sum().backward()
        """, "GT714", holds="len(mon.norms) == 2"), Shape("""
        class GradMonitor:
            def __init__(self):
                self.norms = {}
            def attach(self, net):
                for name, p in net.named_parameters():
                    p.register_hook(lambda g, name=name: self.norms.__setitem__(name, g.norm()))
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        model[0].requires_grad_(False)
        mon = GradMonitor()
        mon.attach(model)
        model(torch.randn(3, 4)).sum().backward()
        """, "GT714", 6, raises=HOOK_ERR)),
    # GT470, `torch.autograd.grad(..., inputs=list(m.parameters()))` in a helper; the freeze is
    # in another helper called once. Look-alike: the frozen model is the teacher, the
    # gradient is the student's
    "autograd-grad-inputs-of-model-frozen-by-helper": (Shape("""
        def freeze(m):
            for p in m.parameters():
                p.requires_grad = False
        def grads_of(net, loss):
            return torch.autograd.grad(loss, inputs=list(net.parameters()))
        student = nn.Linear(4, 2)
        teacher = nn.Linear(4, 2)
        freeze(teacher)
        x = torch.randn(5, 4)
        g = grads_of(student, F.mse_loss(student(x), teacher(x)))
        """, "GT470", holds="len(g) == 2"), Shape("""
        def freeze(m):
            for p in m.parameters():
                p.requires_grad = False
        def grads_of(net, loss):
            return torch.autograd.grad(loss, inputs=list(net.parameters()))
        student = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
        freeze(student[0])
        x = torch.randn(5, 4)
        g = grads_of(student, student(x).pow(2).mean())
        """, "GT470", 5, raises=AUTOGRAD_ERR)),
    # GT470, the class's own `__init__` freezes its embedding and a method of the class reads
    # every parameter's `.grad` in a dict comprehension. Look-alike: the comprehension skips
    # parameters whose `.grad` is None
    "grad-stats-of-class-freezing-its-own-part": (Shape("""
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.embed.weight.requires_grad = False
                self.out = nn.Linear(4, 3)
            def forward(self, idx):
                return self.out(self.embed(idx))
        class Trainer:
            def __init__(self, model):
                self.model = model
            def stats(self):
                return {n: p.grad.abs().mean() for n, p in self.model.named_parameters()
                        if p.grad is not None}
        trainer = Trainer(Tagger())
        trainer.model(torch.tensor([1, 2])).sum().backward()
        s = trainer.stats()
        """, "GT470", holds="len(s) == 2"), Shape("""
        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                for p in self.embed.parameters():
                    p.requires_grad = False
                self.out = nn.Linear(4, 3)
            def forward(self, idx):
                return self.out(self.embed(idx))
        class Trainer:
            def __init__(self, model):
                self.model = model
            def stats(self):
                return {n: p.grad.abs().mean() for n, p in self.model.named_parameters()}
        trainer = Trainer(Tagger())
        trainer.model(torch.tensor([1, 2])).sum().backward()
        s = trainer.stats()
        """, "GT470", 14, raises=NONE_GRAD)),
    # GT471, groups appended one by one in a builder function, a float factor under a key of
    # the project's own (`decay_factor`). Look-alike: the builder reads the factor back into
    # `lr` once the optimizer is made
    "group-factor-appended-never-read": (Shape("""
        def build(net, base_lr):
            groups = []
            for i, layer in enumerate(net):
                factor = 0.5
                if i == 0:
                    factor = 1.0
                groups.append({"params": layer.parameters(), "decay_factor": factor})
            opt = torch.optim.SGD(groups, lr=base_lr)
            for g in opt.param_groups:
                g["lr"] = base_lr * g["decay_factor"]
            return opt
        net = nn.Sequential(nn.Linear(2, 1), nn.Linear(1, 1))
        opt = build(net, 1.0)
        before = net[1].bias.detach().clone()
        net(torch.ones(1, 2)).sum().backward()
        opt.step()
        moved = (before - net[1].bias).item()
        """, "GT471", holds="abs(moved - 0.5) < 1e-6"), Shape("""
        def build(net, base_lr):
            groups = []
            for i, layer in enumerate(net):
                factor = 0.5
                if i == 0:
                    factor = 1.0
                groups.append({"params": layer.parameters(), "decay_factor": factor})
            opt = torch.optim.SGD(groups, lr=base_lr)
            return opt
        net = nn.Sequential(nn.Linear(2, 1), nn.Linear(1, 1))
        opt = build(net, 1.0)
        before = net[1].bias.detach().clone()
        net(torch.ones(1, 2)).sum().backward()
        opt.step()
        moved = (before - net[1].bias).item()
        """, "GT471", 7, holds="abs(moved - 1.0) < 1e-6")),
    # GT463, a no-decay name built as `mn + ".scale"` for the GroupNorm/LayerNorm modules
    # found by `named_modules()` (torch names them `weight`/`bias`); the norm weight stays in
    # the decayed group and AdamW shrinks it. Look-alike: the name ends in `.weight`
    "no-decay-name-built-for-missing-norm-parameter": (Shape("""
        def groups(model):
            skip = []
            for mn, m in model.named_modules():
                if isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
                    skip.append(mn + ".weight")
            decay = [p for n, p in model.named_parameters() if n not in skip]
            rest = [p for n, p in model.named_parameters() if n in skip]
            return [{"params": decay, "weight_decay": 0.5}, {"params": rest, "weight_decay": 0.0}]
        model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
        opt = torch.optim.AdamW(groups(model), lr=0.1)
        model(torch.randn(2, 4)).sum().mul(0).backward()
        opt.step()
        w = model[1].weight.detach().clone()
        """, "GT463", holds="torch.equal(w, torch.ones(4))"), Shape("""
        def groups(model):
            skip = []
            for mn, m in model.named_modules():
                if isinstance(m, (nn.LayerNorm, nn.GroupNorm)):
                    skip.append(mn + ".scale")
            decay = [p for n, p in model.named_parameters() if n not in skip]
            rest = [p for n, p in model.named_parameters() if n in skip]
            return [{"params": decay, "weight_decay": 0.5}, {"params": rest, "weight_decay": 0.0}]
        model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
        opt = torch.optim.AdamW(groups(model), lr=0.1)
        model(torch.randn(2, 4)).sum().mul(0).backward()
        opt.step()
        w = model[1].weight.detach().clone()
        """, "GT463", 5, holds="bool((w < 1).all())")),
}


def test_group_keys_cover_every_torch_optimizer() -> None:
    """GT471's table holds every key a torch.optim optimizer puts in a param group."""
    import inspect

    from gradtrace.lint.rules.registration.group_keys import OPTIM_GROUP_KEYS
    for name in dir(torch.optim):
        cls = getattr(torch.optim, name)
        if not (inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer)) \
                or cls is torch.optim.Optimizer:
            continue
        shape = (2, 2)
        try:
            opt = cls([torch.nn.Parameter(torch.zeros(shape))], lr=0.1)
        except (TypeError, ValueError, RuntimeError):
            continue
        assert set(opt.param_groups[0]) <= OPTIM_GROUP_KEYS, name


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
