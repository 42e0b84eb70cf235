"""Readings of docs/triage/static25b.md (the rank fact, NOTE [ranks]), each in spellings the
real-world cases do not use, as a buggy twin that real torch fails on and a correct look-alike
that runs; the checker reports the first and stays silent on the second."""
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

IMPLICIT = (RuntimeError, "grad can be implicitly created only for scalar outputs")
MISMATCH = (RuntimeError, "Mismatch in shape")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT715: a loss helper returns one value per sample (a reduction over dim 1 of a 2-d
    # per-element loss). Look-alike: the helper averages them
    "helper-returns-per-sample-loss": (Shape("""
        def multi_label(logits, y):
            flat = logits.view(logits.size(0), -1)
            return F.binary_cross_entropy_with_logits(flat, y, reduction="none").sum(dim=1).mean()
        net = nn.Linear(6, 4)
        loss = multi_label(net(torch.randn(5, 6)), torch.rand(5, 4))
        loss.backward()
        """, "GT715", holds="net.weight.grad is not None"), Shape("""
        def multi_label(logits, y):
            flat = logits.view(logits.size(0), -1)
            return F.binary_cross_entropy_with_logits(flat, y, reduction="none").sum(dim=1)
        net = nn.Linear(6, 4)
        loss = multi_label(net(torch.randn(5, 6)), torch.rand(5, 4))
        loss.backward()
        """, "GT715", 3, raises=IMPLICIT)),
    # GT715: one column of a model's output backpropagated. Look-alike: the pre-0.4 idiom,
    # a one-element view of the batch mean
    "column-of-module-output": (Shape("""
        critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        out = critic(torch.randn(3, 4)).mean(0).view(1)
        out.backward()
        """, "GT715", holds="critic[0].weight.grad is not None"), Shape("""
        critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        out = critic(torch.randn(3, 4))[:, 0]
        out.backward()
        """, "GT715", 3, raises=IMPLICIT)),
    # GT715: autograd.grad of a softmax's column without grad_outputs. Look-alike: with them
    "grad-of-softmax-column": (Shape("""
        x = torch.randn(3, 4, requires_grad=True)
        probs = F.softmax(nn.Linear(4, 5)(x), dim=1)
        g, = torch.autograd.grad(probs[:, 1], x, grad_outputs=torch.ones(3))
        """, "GT715", holds="g.shape == (3, 4)"), Shape("""
        x = torch.randn(3, 4, requires_grad=True)
        probs = F.softmax(nn.Linear(4, 5)(x), dim=1)
        g, = torch.autograd.grad(probs[:, 1], x)
        """, "GT715", 3, raises=IMPLICIT)),
    # GT715: a one-step critic update on a single state: the output of `Linear(16, 1)` has
    # one element, backward runs. Twin: a Q-head with one output per action
    "single-state-critic-output": (Shape("""
        critic = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        value = critic(torch.randn(4))
        critic_loss = (1.0 - value).pow(2)
        critic_loss.backward()
        """, "GT715", holds="critic[0].weight.grad is not None"), Shape("""
        q_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
        q = q_net(torch.randn(4))
        td_loss = (1.0 - q).pow(2)
        td_loss.backward()
        """, "GT715", 4, raises=IMPLICIT)),
    # GT716: `backward(torch.tensor([1.0]))` on a 0-dim loss. Look-alike: the loss viewed as
    # one element first
    "one-element-gradient-for-0-dim-loss": (Shape("""
        net = nn.Linear(4, 1)
        loss = F.mse_loss(net(torch.randn(3, 4)), torch.randn(3, 1)).view(1)
        loss.backward(torch.tensor([1.0]))
        """, "GT716", holds="net.weight.grad is not None"), Shape("""
        net = nn.Linear(4, 1)
        loss = F.mse_loss(net(torch.randn(3, 4)), torch.randn(3, 1))
        loss.backward(torch.tensor([1.0]))
        """, "GT716", 3, raises=MISMATCH)),
    # GT716: a 0-dim gradient, bound to a name, for a per-element loss. Look-alike:
    # `torch.ones_like`
    "0-dim-gradient-for-per-element-loss": (Shape("""
        pred = nn.Linear(4, 2)(torch.randn(3, 4))
        per = F.l1_loss(pred, torch.randn(3, 2), reduction="none")
        seed = torch.ones_like(per)
        per.backward(seed)
        """, "GT716", holds="seed.shape == (3, 2)"), Shape("""
        pred = nn.Linear(4, 2)(torch.randn(3, 4))
        per = F.l1_loss(pred, torch.randn(3, 2), reduction="none")
        seed = torch.tensor(1.0)
        per.backward(seed)
        """, "GT716", 3, raises=MISMATCH)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
