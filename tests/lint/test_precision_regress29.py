"""Findings that changed on the research corpora u24..u29d between the session's first main
and its last (docs/triage/regress29.md, session 29): each shape next to its look-alike, on
real torch."""
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

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # CRSLab (crslab/system/base.py): `def backward(self, loss)` seeds the loss it is handed
    # with itself, then `self._update_params()` steps the optimizer: a training step's loss,
    # so every `.grad` is the gradient times the loss (found at the session's start, lost
    # when GT796 asked for a value the file shows to hold one element). Look-alike: a helper
    # handed a feature map seeds it with itself and moves the image by hand (DeepDream's
    # objective `(v ** 2).sum() / 2`), no optimizer stepped
    "argument-seeded-with-itself-in-a-training-step": (Shape("""
        def dream_step(img, act):
            act.backward(act)
            img.data += 0.1 * img.grad / img.grad.std()
            img.grad.zero_()
        img = torch.rand(1, 3, 8, 8, requires_grad=True)
        conv = nn.Conv2d(3, 4, 3)
        before = img.detach().clone()
        dream_step(img, F.relu(conv(img)))
        moved = not torch.equal(before, img.detach())
        """, "GT796", holds="moved"), Shape("""
        class System:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            def backward(self, loss):
                self.optimizer.zero_grad()
                loss.backward(loss.clone().detach())
                self.update_params()
            def update_params(self):
                self.optimizer.step()
        net = nn.Linear(3, 1)
        x, y = torch.ones(4, 3), torch.zeros(4, 1)
        loss = F.mse_loss(net(x), y)
        g, = torch.autograd.grad(loss, net.bias, retain_graph=True)
        System(net).backward(loss)
        """, "GT796", line=7,
        holds="torch.allclose(net.bias.grad, loss.item() * g)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
