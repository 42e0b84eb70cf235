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
        """, "GT509", 6, SECOND_TIME)),
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
        """, "GT509", 12, SECOND_TIME)),
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
    exec(compile(_source(good), "good.py", "exec"), {})  # real torch: no error


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    _, bad = SHAPES[name]
    assert _found(bad) == [(bad.line, bad.code)]
    with pytest.raises(RuntimeError, match=bad.raises):
        exec(compile(_source(bad), "bad.py", "exec"), {})
