"""GT430-GT433, GT434, GT440-GT441 (freezes that do nothing, freeze everything, are undone, come
too late, or leave `.grad` None):
each buggy twin (two or more spellings: script, helper function, method) fires on the right
line, each look-alike stays silent, and every snippet runs on real torch to show that the
twin fails (or silently does not freeze) exactly as the rule says."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
torch.manual_seed(0)
x, y = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(3, 4), nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.body(x))
"""


EMPTY = "optimizer got an empty parameter list"
NO_GRAD = "does not require grad"

SHAPES = [
    # GT430: the misspelled flag on a parameter freezes nothing
    Shape("""
        model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        for param in model[0].parameters():
            param.require_grad = False
        """, "GT430", 3, holds="model[0].weight.requires_grad"),
    Shape("""
        model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        for name, w in model.named_parameters():
            if name.startswith("0."):
                w.requires_grads = False
        """, "GT430", 4, holds="model[0].weight.requires_grad"),
    Shape("""
        model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
        for param in model[0].parameters():
            param.requires_grad = False
        class Args: pass
        args = Args()
        args.require_grad = False
        """, "GT430", holds="not model[0].weight.requires_grad"),
    # GT431: everything frozen, the optimizer gets nothing (script, method, helper)
    Shape("""
        model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        for p in model.parameters():
            p.requires_grad = False
        opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
        """, "GT431", 3, (ValueError, EMPTY)),
    Shape("""
        class Trainer:
            def __init__(self, model, freeze=True):
                self.model = model
                if freeze:
                    for p in self.model.head.parameters():
                        p.requires_grad = False
                params = filter(lambda p: p.requires_grad, self.model.head.parameters())
                self.opt = torch.optim.Adam(params)
        net = nn.Module()
        net.body, net.head = nn.Linear(3, 4), nn.Linear(4, 2)
        Trainer(net)
        """, "GT431", 6, (ValueError, EMPTY)),
    Shape("""
        def train(llm, epochs=1):
            llm.requires_grad_(False)
            opt = torch.optim.AdamW(llm.parameters(), lr=1e-3)
            for _ in range(epochs):
                opt.zero_grad()
                nn.functional.cross_entropy(llm(x), y).backward()
                opt.step()
        train(nn.Linear(3, 2))
        """, "GT431", 2, (RuntimeError, NO_GRAD)),
    Shape("""
        model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        for p in model.parameters():
            p.requires_grad = False
        model[2] = nn.Linear(4, 2)
        model.head = nn.Linear(2, 2)
        opt = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()))
        """, "GT431", holds="len(opt.param_groups[0]['params']) == 4"),
    Shape("""
        def train(llm, epochs=4):
            llm.requires_grad_(False)
            opt = torch.optim.AdamW(llm.parameters(), lr=1e-3)
            for epoch in range(epochs):
                if epoch == 1:
                    llm.requires_grad_(True)
                    continue
                if epoch > 1:
                    opt.zero_grad()
                    nn.functional.cross_entropy(llm(x), y).backward()
                    opt.step()
        train(nn.Linear(3, 2))
        """, "GT431"),
    # GT432: the train-everything loop undoes the freeze before anything ran
    Shape("""
        model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        before = model[0].weight.detach().clone()
        for k, v in model.named_parameters():
            if k.startswith("0."):
                v.requires_grad = False
        pg = []
        for k, v in model.named_parameters():
            v.requires_grad = True
            pg.append(v)
        opt = torch.optim.SGD(pg, lr=0.1)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        """, "GT432", 8, holds="not torch.equal(before, model[0].weight)"),
    Shape("""
        def setup(model):
            model.body.requires_grad_(False)
            model.requires_grad_()
            return torch.optim.SGD(model.parameters(), lr=0.1)
        model = Net()
        opt = setup(model)
        """, "GT432", 3, holds="model.body.weight.requires_grad"),
    Shape("""
        netD, netG = nn.Linear(3, 1), nn.Linear(3, 3)
        netD.requires_grad_(False)
        loss_g = -netD(netG(x)).mean()
        netD.requires_grad_(True)
        loss_g.backward()
        """, "GT432", holds="netD.weight.grad is None and netG.weight.grad is not None"),
    # GT433: `.grad` of a frozen parameter is None
    Shape("""
        model = Net()
        for param in model.body.parameters():
            param.requires_grad = False
        nn.functional.cross_entropy(model(x), y).backward()
        for param in model.parameters():
            param.grad.data /= 2
        """, "GT433", 6, (AttributeError, "'NoneType' object has no attribute 'data'")),
    Shape("""
        def scale(model, k):
            model.body.requires_grad_(False)
            nn.functional.cross_entropy(model(x), y).backward()
            for name, p in model.named_parameters():
                p.grad.mul_(k)
        scale(Net(), 0.5)
        """, "GT433", 5, (AttributeError, "'NoneType' object has no attribute 'mul_'")),
    Shape("""
        model = Net()
        for param in model.body.parameters():
            param.requires_grad = False
        nn.functional.cross_entropy(model(x), y).backward()
        for param in model.parameters():
            if param.grad is not None:
                param.grad.data /= 2
        """, "GT433", holds="model.body.weight.grad is None"),
    # GT434: a constant kept as a frozen Parameter is trained by a whole-model unfreeze
    Shape("""
        class Fourier(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.randn(3, 3), requires_grad=False)
            def forward(self, v):
                return torch.sin(v @ self.b)
        model = nn.Sequential(Fourier(), nn.Linear(3, 2))
        model.requires_grad_(True)
        before = model[0].b.detach().clone()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        """, "GT434", 4, holds="not torch.equal(before, model[0].b)"),
    Shape("""
        class Fourier(nn.Module):
            def __init__(self):
                super().__init__()
                self.b = nn.Parameter(torch.randn(3, 3), requires_grad=False)
            def forward(self, v):
                return torch.sin(v @ self.b)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = Fourier()
                self.fc = nn.Linear(3, 2)
            def forward(self, v):
                return self.fc(self.enc(v))
        model = Model()
        for p in model.parameters():
            p.requires_grad = True
        """, "GT434", 4, holds="model.enc.b.requires_grad"),
    Shape("""
        class Fourier(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("b", torch.randn(3, 3))
            def forward(self, v):
                return torch.sin(v @ self.b)
        model = nn.Sequential(Fourier(), nn.Linear(3, 2))
        model.requires_grad_(True)
        """, "GT434", holds="not model[0].b.requires_grad"),
    # GT440: unfrozen in one method after another built the optimizer from the trainable ones
    Shape("""
        def set_grad(m, b):
            for p in m.parameters():
                p.requires_grad_(b)
        class Learner:
            def __init__(self, model):
                self.model = model
            def create_opt(self):
                self.opt = torch.optim.SGD([p for p in self.model.parameters() if p.requires_grad], lr=0.1)
            def freeze(self):
                set_grad(self.model.body, False)
                self.create_opt()
            def unfreeze(self):
                set_grad(self.model.body, True)
            def fit(self):
                self.opt.zero_grad()
                nn.functional.cross_entropy(self.model(x), y).backward()
                self.opt.step()
        learn = Learner(Net())
        learn.freeze()
        learn.fit()
        learn.unfreeze()
        before = learn.model.body.weight.detach().clone()
        learn.fit()
        """, "GT440", 13, holds="torch.equal(before, learn.model.body.weight)"),
    Shape("""
        class Learner:
            def __init__(self, model):
                self.model = model
                for p in self.model.body.parameters():
                    p.requires_grad = False
                self.opt = torch.optim.SGD(filter(lambda p: p.requires_grad, self.model.parameters()), lr=0.1)
            def unfreeze(self):
                for p in self.model.body.parameters():
                    p.requires_grad = True
            def fit(self):
                self.opt.zero_grad()
                nn.functional.cross_entropy(self.model(x), y).backward()
                self.opt.step()
        learn = Learner(Net())
        learn.unfreeze()
        before = learn.model.body.weight.detach().clone()
        learn.fit()
        """, "GT440", 8, holds="torch.equal(before, learn.model.body.weight)"),
    Shape("""
        class Learner:
            def __init__(self, model):
                self.model = model
            def create_opt(self):
                self.opt = torch.optim.SGD([p for p in self.model.parameters() if p.requires_grad], lr=0.1)
            def unfreeze(self):
                self.model.body.requires_grad_(True)
                self.create_opt()
            def fit(self):
                self.opt.zero_grad()
                nn.functional.cross_entropy(self.model(x), y).backward()
                self.opt.step()
        learn = Learner(Net())
        learn.model.body.requires_grad_(False)
        learn.create_opt()
        learn.unfreeze()
        before = learn.model.body.weight.detach().clone()
        learn.fit()
        """, "GT440", holds="not torch.equal(before, learn.model.body.weight)"),
    # GT441: a freeze between backward and step does not stop this step
    Shape("""
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = model.body.weight.detach().clone()
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        for p in model.body.parameters():
            p.requires_grad = False
        opt.step()
        """, "GT441", 6, holds="not torch.equal(before, model.body.weight)"),
    Shape("""
        class Freezer:
            def __init__(self, names):
                self.names = names
            def apply(self, module):
                for name, p in module.named_parameters():
                    if name in self.names:
                        p.requires_grad = False
        class Stepper:
            def __init__(self, optimizer, module, freezer):
                self.optimizer, self.module, self.freezer = optimizer, module, freezer
            def step(self):
                self.freezer.apply(self.module)
                self.optimizer.step()
        model = Net()
        stepper = Stepper(torch.optim.SGD(model.parameters(), lr=0.1), model, Freezer(["body.weight"]))
        before = model.body.weight.detach().clone()
        nn.functional.cross_entropy(model(x), y).backward()
        stepper.step()
        """, "GT441", 12, holds="not torch.equal(before, model.body.weight)"),
    Shape("""
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = model.body.weight.detach().clone()
        for p in model.body.parameters():
            p.requires_grad = False
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        """, "GT441", holds="torch.equal(before, model.body.weight)"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{s.code}-{i}" for i, s in enumerate(SHAPES)])
def test_shape_on_checker_and_torch(shape: Shape) -> None:
    judge(PRELUDE, shape)
