"""Shapes that fired wrongly on the projects of docs/triage/unseen33c.md (session 33: small
PyTorch libraries and toolkits, Kaggle solutions, blog companions), each in another spelling
than the project's and next to a buggy twin that is still reported. The snippets run on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Hsuxu/Loss_ToolBox-PyTorch (seg_loss/tverskyloss.py): a Tversky loss written as an
    # autograd Function: `input.max(1)` in `forward` (which runs without grad), the gradient
    # given by its own `backward`. Twin: the same computation in a module's forward: nothing
    # reaches the input
    "hard-loss-computed-inside-an-autograd-function": (Shape("""
        class HardTverskyLoss(Function):
            @staticmethod
            def forward(ctx, logits, target):
                _, label = logits.max(1)
                ctx.save_for_backward(logits, target)
                return (label.float() - target.float()).abs().mean()
            @staticmethod
            def backward(ctx, grad_out):
                logits, target = ctx.saved_tensors
                return torch.full_like(logits, 0.5) * grad_out, None
        net = nn.Linear(4, 3)
        loss = HardTverskyLoss.apply(net(torch.randn(5, 4)), torch.randint(0, 3, (5,)))
        loss.backward()
        """, "GT108", holds="net.weight.grad is not None"),
        Shape("""
        class HardTverskyLoss(nn.Module):
            def forward(self, logits, target):
                _, label = logits.max(1)
                return (label.float() - target.float()).abs().mean()
        net = nn.Linear(4, 3)
        loss = HardTverskyLoss()(net(torch.randn(5, 4)), torch.randint(0, 3, (5,)))
        loss.backward()
        """, "GT108", line=3, raises=(RuntimeError, "does not require grad"))),
    # benathi/fastswa-semi-sup (mean_teacher/architectures.py): shake-shake's `Shake` with
    # `@classmethod` forward and backward: `cls` is bound, `forward(cls, ctx, a, b, training)`
    # takes three inputs and backward returns three gradients. Twin: backward returns two
    "classmethod-forward-of-an-autograd-function": (Shape("""
        class Mix(Function):
            @classmethod
            def forward(cls, ctx, a, b, training):
                return a * 0.3 + b * 0.7
            @classmethod
            def backward(cls, ctx, grad_output):
                return grad_output * 0.5, grad_output * 0.5, None
        a = torch.randn(3, requires_grad=True)
        b = torch.randn(3, requires_grad=True)
        Mix.apply(a, b, True).sum().backward()
        """, "GT701", holds="a.grad is not None and b.grad is not None"),
        Shape("""
        class Mix(Function):
            @classmethod
            def forward(cls, ctx, a, b, training):
                return a * 0.3 + b * 0.7
            @classmethod
            def backward(cls, ctx, grad_output):
                return grad_output * 0.5, grad_output * 0.5
        a = torch.randn(3, requires_grad=True)
        b = torch.randn(3, requires_grad=True)
        Mix.apply(a, b, True).sum().backward()
        """, "GT701", line=7, raises=(RuntimeError, "incorrect number of gradients"))),
    # pprp/SimpleCVReproduction (single-path-one-shot's slimmable_resnet20.py): the block's
    # body appends its ReLU under `if i == 0:` in the loop over its convolutions, so it ends
    # with a batch norm, whose output `res += shortcut(x)` may overwrite. Twin: the ReLU
    # appended on the last pass: the body ends with it and the in-place add breaks backward
    "activation-appended-on-the-first-pass-only": (Shape("""
        class Block(nn.Module):
            def __init__(self, widths):
                super().__init__()
                layers = []
                for i, w in enumerate(widths):
                    layers.append(nn.Conv2d(w, w, 3, padding=1))
                    layers.append(nn.BatchNorm2d(w))
                    if i == 0:
                        layers.append(nn.ReLU())
                self.body = nn.Sequential(*layers)
                self.shortcut = nn.Sequential()
            def forward(self, x):
                res = self.body(x)
                res += self.shortcut(x)
                return F.relu(res)
        x = torch.randn(2, 4, 5, 5, requires_grad=True)
        Block([4, 4])(x).sum().backward()
        """, "GT603", holds="x.grad is not None"),
        Shape("""
        class Block(nn.Module):
            def __init__(self, widths):
                super().__init__()
                layers = []
                for i, w in enumerate(widths):
                    layers.append(nn.Conv2d(w, w, 3, padding=1))
                    layers.append(nn.BatchNorm2d(w))
                    if i == len(widths) - 1:
                        layers.append(nn.ReLU())
                self.body = nn.Sequential(*layers)
                self.shortcut = nn.Sequential()
            def forward(self, x):
                res = self.body(x)
                res += self.shortcut(x)
                return F.relu(res)
        x = torch.randn(2, 4, 5, 5, requires_grad=True)
        Block([4, 4])(x).sum().backward()
        """, "GT603", line=14, raises=(RuntimeError, "inplace operation"))),
    # huawei-noah/Efficient-Computing (Distillation/VanillaKD/losses/crd.py): CRD lists its
    # two embeddings' parameters; the memory bank holds buffers only and the contrast loss a
    # number: neither has a parameter to leave out. Twin: a projection with weights left out
    "parts-without-parameters-left-out-of-the-groups": (Shape("""
        class Memory(nn.Module):
            def __init__(self, dim, n):
                super().__init__()
                self.n = n
                self.register_buffer("bank", torch.randn(n, dim))
            def forward(self, v):
                return v @ self.bank.t()
        class NCELoss(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.n = n
            def forward(self, s):
                return -(s.log_softmax(1)[:, 0]).mean() / float(self.n)
        class CRD(nn.Module):
            def __init__(self, dim, n):
                super().__init__()
                self.embed_s = nn.Linear(dim, dim)
                self.embed_t = nn.Linear(dim, dim)
                self.memory = Memory(dim, n)
                self.criterion = NCELoss(n)
            def forward(self, fs, ft):
                return self.criterion(self.memory(self.embed_s(fs) + self.embed_t(ft)))
            def learnable(self):
                return list(self.embed_s.parameters()) + list(self.embed_t.parameters())
        crd = CRD(4, 6)
        opt = torch.optim.SGD(crd.learnable(), lr=0.1)
        before = crd.embed_s.weight.detach().clone()
        crd(torch.randn(3, 4), torch.randn(3, 4)).backward()
        opt.step()
        """, "GT462", holds="not torch.equal(before, crd.embed_s.weight)"),
        Shape("""
        class CRD(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.embed_s = nn.Linear(dim, dim)
                self.embed_t = nn.Linear(dim, dim)
                self.proj = nn.Linear(dim, 6)
            def forward(self, fs, ft):
                return -self.proj(self.embed_s(fs) + self.embed_t(ft)).log_softmax(1)[:, 0].mean()
            def learnable(self):
                return list(self.embed_s.parameters()) + list(self.embed_t.parameters())
        crd = CRD(4)
        opt = torch.optim.SGD(crd.learnable(), lr=0.1)
        before = crd.proj.weight.detach().clone()
        crd(torch.randn(3, 4), torch.randn(3, 4)).backward()
        opt.step()
        """, "GT462", line=10, holds="torch.equal(before, crd.proj.weight)")),
    # kazuto1011/grad-cam-pytorch (grad_cam.py): `self.image = image.requires_grad_()` in the
    # wrapper's forward: the caller's input made to require grad in place, a leaf whose
    # `.grad` backward fills. Twin: the attribute holds the first layer's output
    "saliency-input-made-to-require-grad-in-place": (Shape("""
        class BackProp(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
            def forward(self, image):
                self.image = image.requires_grad_()
                return self.model(self.image)
            def generate(self):
                return self.image.grad.clone()
        bp = BackProp(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 3)))
        bp(torch.randn(2, 4)).sum().backward()
        sal = bp.generate()
        """, "GT307", holds="sal.shape == (2, 4)"),
        Shape("""
        class BackProp(nn.Module):
            def __init__(self):
                super().__init__()
                self.first = nn.Linear(4, 4)
                self.head = nn.Linear(4, 3)
            def forward(self, image):
                self.image = self.first(image)
                return self.head(self.image)
            def generate(self):
                return self.image.grad.clone()
        bp = BackProp()
        bp(torch.randn(2, 4)).sum().backward()
        sal = bp.generate()
        """, "GT307", line=7, raises=(AttributeError, "clone"))),
    # hjmshi/PyTorch-LBFGS (examples/Other/lbfgs_tests.py): the line search's `step(options)`
    # gets `'current_loss': obj` (a value it compares) and returns the loss its closure
    # computes anew; that new `obj` is backpropagated. Twin: the old loss added to the new
    "line-search-step-returns-a-new-loss": (Shape("""
        class LineSearch(torch.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))
            def step(self, options=None):
                with torch.no_grad():
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.add_(p.grad, alpha=-group["lr"])
                f_new = options["closure"]()
                return f_new, float(f_new) < float(options["current_loss"])
        w = nn.Parameter(torch.randn(3))
        optimizer = LineSearch([w])
        def model():
            return (w ** 2).sum()
        line_search = "Armijo"
        optimizer.zero_grad()
        obj = model()
        obj.backward()
        for n_iter in range(4):
            def closure():
                optimizer.zero_grad()
                return model()
            options = {"closure": closure, "current_loss": obj}
            if line_search == "Armijo":
                obj, better = optimizer.step(options=options)
                obj.backward()
        """, "GT509", holds="float(obj) >= 0"),
        Shape("""
        class LineSearch(torch.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))
            def step(self, options=None):
                with torch.no_grad():
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.add_(p.grad, alpha=-group["lr"])
                f_new = options["closure"]()
                return f_new, float(f_new) < float(options["current_loss"])
        w = nn.Parameter(torch.randn(3))
        optimizer = LineSearch([w])
        def model():
            return (w ** 2).sum()
        line_search = "Armijo"
        optimizer.zero_grad()
        obj = model()
        obj.backward()
        for n_iter in range(4):
            def closure():
                optimizer.zero_grad()
                return model()
            options = {"closure": closure, "current_loss": obj}
            if line_search == "Armijo":
                new, better = optimizer.step(options=options)
                total = new + obj
                total.backward()
                obj = new.detach()
        """, "GT509", line=26, raises=(RuntimeError, "second time"))),
    # pprp/SimpleCVReproduction (cvpr21_nas_track1's resnet20_supernet.py): DARTS-style
    # architecture weights as plain tensors that require grad, gathered in `self.alpha = [...]`,
    # which no method of the model reads: the training script builds its own
    # `Adam(model.alpha)`. Twin: a plain weight the forward uses, left out of parameters()
    "architecture-weights-listed-for-the-callers-optimizer": (Shape("""
        class Supernet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
                self.alpha1 = torch.zeros(2, 3).requires_grad_()
                self.alpha2 = torch.zeros(2, 3).requires_grad_()
                self.alpha = [self.alpha1, self.alpha2]
            def forward(self, x):
                w = F.softmax(self.alpha1, -1).sum(0) + F.softmax(self.alpha2, -1).sum(0)
                return self.fc(x) * w
        model = Supernet()
        arch_opt = torch.optim.Adam(model.alpha, lr=0.1)
        model(torch.randn(2, 4)).sum().backward()
        arch_opt.step()
        """, "GT402", holds="model.alpha1.abs().sum() > 0"),
        Shape("""
        class Supernet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
                self.scale = torch.ones(3).requires_grad_()
            def forward(self, x):
                return self.fc(x) * self.scale
        model = Supernet()
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT402", line=5, holds="torch.equal(model.scale, torch.ones(3))")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
