"""Shapes that fired wrongly on projects the team never triaged (issue "Root cause, every
time", section 4), each next to its buggy twin. Every snippet is also *run* on real torch:
the silent one trains, the twin fails (or silently does not train) exactly as the rule says,
so the checker's verdict is tested against PyTorch itself."""
from __future__ import annotations

import textwrap
from typing import NamedTuple

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
from torch.autograd import Variable
torch.manual_seed(0)
ce = nn.CrossEntropyLoss()
labels = torch.tensor([0, 1, 0])
"""


class Shape(NamedTuple):
    src: str
    code: str                 # the rule that must stay silent / fire
    line: int | None = None   # buggy twin: the line reported (1-based, after the prelude)
    raises: str | None = None  # buggy twin: what real torch raises
    holds: str | None = None  # an expression true after running it (the silent symptom, or
    #                           that the look-alike did what it should)


SECOND_TIME = "Trying to backward through the graph a second time"

SHAPES = {
    # PGD-style loop: autograd.grad w.r.t. a perturbation stops there, the features computed
    # before the loop keep their graph (NOTE [grad inputs])
    "grad-wrt-perturbation-keeps-upstream": (Shape("""
        encoder, head = nn.Linear(4, 4), nn.Linear(4, 2)
        feats = encoder(torch.randn(3, 4))
        for _ in range(3):
            delta = torch.zeros_like(feats, requires_grad=True)
            adv = ce(head(feats + delta), labels)
            g, = torch.autograd.grad(adv, delta)
        loss = ce(head(feats + g.sign()), labels)
        loss.backward()
        """, "GT507"), Shape("""
        encoder, head = nn.Linear(4, 4), nn.Linear(4, 2)
        feats = encoder(torch.randn(3, 4))
        for _ in range(3):
            delta = torch.zeros_like(feats, requires_grad=True)
            adv = ce(head(feats + delta), labels)
            g, = torch.autograd.grad(adv, encoder.weight)
        loss = ce(head(feats + g.sum()), labels)
        loss.backward()
        """, "GT507", 2, SECOND_TIME)),
    # a gradient taken w.r.t. shared features: their own graph is not run, a later backward
    # through them is fine; one w.r.t. something upstream frees what lies between
    "grad-wrt-shared-features": (Shape("""
        backbone, cls_head, box_head = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
        features = backbone(torch.randn(3, 4))
        out = cls_head(features)
        g = torch.autograd.grad(ce(out, labels), features)
        loss_box = ce(box_head(features), labels)
        loss_box.backward()
        """, "GT509"), Shape("""
        backbone, cls_head, box_head = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)
        features = backbone(torch.randn(3, 4))
        out = cls_head(features)
        g = torch.autograd.grad(ce(out, labels), features)
        loss_box = ce(out * 2, labels)
        loss_box.backward()
        """, "GT509", 4, SECOND_TIME)),
    # WGAN-GP: the penalty helper wraps its inputs in the legacy Variable(..., requires_grad=
    # True), a new leaf, so the discriminator loss holds no path into the generator
    "penalty-helper-makes-a-new-leaf": (Shape("""
        netG = nn.Sequential(nn.Linear(2, 4), nn.Tanh())
        netD = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        def gradient_penalty(D, real, fake):
            alpha = torch.rand(real.size(0), 1)
            interp = Variable(alpha * real + (1 - alpha) * fake, requires_grad=True)
            grads = torch.autograd.grad(D(interp).sum(), interp, create_graph=True)[0]
            return ((grads.norm(2, dim=1) - 1) ** 2).mean()
        real, fake = torch.randn(3, 4), netG(torch.randn(3, 2))
        d_loss = netD(fake.detach()).mean() - netD(real).mean() + gradient_penalty(netD, real, fake)
        d_loss.backward()
        g_loss = -netD(fake).mean()
        g_loss.backward()
        """, "GT509"), Shape("""
        netG = nn.Sequential(nn.Linear(2, 4), nn.Tanh())
        netD = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        def gradient_penalty(D, real, fake):
            alpha = torch.rand(real.size(0), 1)
            interp = alpha * real + (1 - alpha) * fake
            grads = torch.autograd.grad(D(interp).sum(), interp, create_graph=True)[0]
            return ((grads.norm(2, dim=1) - 1) ** 2).mean()
        real, fake = torch.randn(3, 4), netG(torch.randn(3, 2))
        d_loss = netD(fake.detach()).mean() - netD(real).mean() + gradient_penalty(netD, real, fake)
        d_loss.backward()
        g_loss = -netD(fake).mean()
        g_loss.backward()
        """, "GT509", 10, SECOND_TIME)),
    # a branch only a PyTorch fork runs (mmcv): on PyTorch the tensor never requires grad
    "requires-grad-in-a-dead-branch": (Shape("""
        def fill(x):
            out = torch.empty_like(x)
            if torch.__version__ == 'parrots':
                out.requires_grad = True
            out.copy_(x * 2)
            return out
        y = fill(torch.ones(2, 2))
        """, "GT302", holds="not y.requires_grad"), Shape("""
        def fill(x):
            out = torch.empty_like(x)
            if x.dim() == 2:
                out.requires_grad = True
            out.copy_(x * 2)
            return out
        y = fill(torch.ones(2, 2))
        """, "GT302", 5, "a leaf Variable that requires grad")),
    # a freeze and an unfreeze in exclusive branches of one `if`
    "freeze-and-unfreeze-in-exclusive-branches": (Shape("""
        model = nn.Module()
        model.body, model.head = nn.Linear(4, 4), nn.Linear(4, 2)
        def setup(model, mode):
            if mode == "head":
                for p in model.head.parameters():
                    p.requires_grad = True
            elif mode == "none":
                for p in model.parameters():
                    p.requires_grad = False
        setup(model, "head")
        """, "GT408", holds="all(p.requires_grad for p in model.head.parameters())"), Shape("""
        model = nn.Module()
        model.body, model.head = nn.Linear(4, 4), nn.Linear(4, 2)
        def setup(model, mode):
            if mode == "head":
                for p in model.head.parameters():
                    p.requires_grad = True
            for p in model.parameters():
                p.requires_grad = False
        setup(model, "head")
        """, "GT408", 7, holds="not any(p.requires_grad for p in model.head.parameters())")),
    # a plain dict of layers on self, handed whole to a child module that registers it
    "layer-dict-handed-to-a-registering-child": (Shape("""
        class Heads(nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.layers = nn.ModuleDict(layers)
        class Model(nn.Module):
            def __init__(self, tasks):
                super().__init__()
                self.task_layers = {}
                for t in tasks:
                    self.task_layers[t] = nn.Linear(4, 2)
                self.heads = Heads(self.task_layers)
        model = Model(["a", "b"])
        """, "GT401", holds="len(list(model.parameters())) == 4"), Shape("""
        class Model(nn.Module):
            def __init__(self, tasks):
                super().__init__()
                self.layer_dict = {}
                for t in tasks:
                    self.layer_dict[t] = nn.Linear(4, 2)
                self.n = len(self.layer_dict)
        model = Model(["a", "b"])
        """, "GT401", 4, holds="len(list(model.parameters())) == 0")),
    # a requires-grad constant only there to switch gradients on for checkpointed inputs
    "requires-grad-switch-for-checkpoint": (Shape("""
        from torch.utils.checkpoint import checkpoint
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.dummy = torch.ones(1, requires_grad=True)
            def forward(self, x):
                x = x + self.dummy - self.dummy
                return checkpoint(self.fc, x, use_reentrant=True)
        block = Block()
        block(torch.randn(2, 4)).sum().backward()
        """, "GT402", holds="block.fc.weight.grad is not None"), Shape("""
        from torch.utils.checkpoint import checkpoint
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.scale = torch.ones(1, requires_grad=True)
            def forward(self, x):
                x = x + self.scale - self.scale * 0.5
                return checkpoint(self.fc, x, use_reentrant=True)
        block = Block()
        block(torch.randn(2, 4)).sum().backward()
        """, "GT402", 6, holds="'scale' not in dict(block.named_parameters())")),
    # `.data` of a batch object (a field), next to `.data` of a model output (a cut)
    "data-field-of-a-batch-object": (Shape("""
        class Batch:
            def __init__(self, data, target):
                self.data, self.target = data, target
        model = nn.Linear(4, 1)
        for raw in [torch.randn(3, 4)]:
            batch = Batch(raw, torch.zeros(3, 1))
            loss = nn.functional.mse_loss(model(batch.data), batch.target)
            loss.backward()
        """, "GT105", holds="model.weight.grad is not None"), Shape("""
        model = nn.Linear(4, 1)
        for raw in [torch.randn(3, 4)]:
            out = model(raw)
            loss = nn.functional.mse_loss(out.data, torch.zeros(3, 1))
            loss.backward()
        """, "GT105", 4, "does not require grad")),
}


def _source(shape: Shape) -> str:
    return PRELUDE + textwrap.dedent(shape.src).lstrip("\n")


def _found(shape: Shape) -> list[tuple[int, str]]:
    found = check_source(_source(shape), "shape.py", select=[shape.code])
    offset = PRELUDE.count("\n")
    return sorted((f.line - offset, f.code) for f in found)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    env: dict = {}
    exec(compile(_source(good), "good.py", "exec"), env)  # real torch: no error
    if good.holds:
        assert eval(good.holds, env)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    _, bad = SHAPES[name]
    assert _found(bad) == [(bad.line, bad.code)]
    env: dict = {}
    if bad.raises:
        with pytest.raises(RuntimeError, match=bad.raises):
            exec(compile(_source(bad), "bad.py", "exec"), env)
    else:
        exec(compile(_source(bad), "bad.py", "exec"), env)
    if bad.holds:
        assert eval(bad.holds, env)
