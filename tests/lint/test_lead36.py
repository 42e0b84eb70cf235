"""Session 36's lead: a module negated inside another op is not a critic the loss climbs
(NOTE [maximized module output]): a head left out of the optimizer is still reported, the
critic of an actor-critic loss stays silent. Both run on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

# a head whose negated output is one side of an elementwise max (an SDF difference, a hinge):
# the loss does not climb it, the optimizer that leaves it out never trains it
TWIN = Shape("""
    body = nn.Linear(4, 3)
    carve = nn.Linear(3, 1)
    w0 = carve.weight.detach().clone()
    opt = torch.optim.Adam(body.parameters(), lr=0.05)
    for step in range(3):
        x, target = torch.randn(16, 4), torch.randn(16, 1)
        h = body(x)
        d = torch.maximum(h[:, :1], -carve(h))
        loss = (d - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """, "GT438", line=4, holds="torch.equal(carve.weight, w0) and carve.weight.grad is not None")

# the same head climbed by the loss through a sum and a mean: a critic, outside on purpose
LOOKALIKE = Shape("""
    policy = nn.Linear(4, 3)
    value = nn.Linear(3, 1)
    p0 = policy.weight.detach().clone()
    opt = torch.optim.Adam(policy.parameters(), lr=0.05)
    for step in range(3):
        s = torch.randn(16, 4)
        a = policy(s)
        loss = (0.1 * a.pow(2).sum(dim=1, keepdim=True) - value(a)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """, "GT438", holds="not torch.equal(policy.weight, p0)")


def test_negated_inside_a_max_is_reported() -> None:
    judge(PRELUDE, TWIN)


def test_climbed_through_a_sum_is_silent() -> None:
    judge(PRELUDE, LOOKALIKE)
