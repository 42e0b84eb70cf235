"""Shapes from the projects of docs/triage/unseen54a.md (session 54), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch."""
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

# an iterative attack that re-wraps its input as a new leaf on every pass (an aliased import)
ATTACK = '''
{v}
model = nn.Linear(4, 4)
x = torch.rand(2, 4)
for i in range(3):
    x = {wrap}
    loss = model(x).pow(2).mean()
    loss.backward()
    x = (x - 0.01 * torch.ones_like(x)).clamp(0, 1)
'''

# importance weights from posterior draws scored by a generator (an entropy estimator)
IMPORTANCE = '''
enc, gen = nn.Linear(4, 2), nn.Linear(2, 3)
x = torch.randn(6, 4)
h = enc(x)
d = torch.distributions.Normal(h, 0.5)
hs = d.sample((5,))
logq, logits = gen(hs).log_softmax(-1).sum(-1), gen(hs)
w = (logq - d.log_prob(hs).sum(-1)).softmax(0)
c = (logits.softmax(-1) * w[..., None]).sum(0){detach}
loss = (c * gen(h)).sum()
loss.backward()
'''

SHAPES = {
    "leaf-rewrapped-by-an-aliased-variable": (
        Shape(ATTACK.format(v="from torch.autograd import Variable as V",
                            wrap="V(x, requires_grad=True)"), "GT506",
              holds="x.grad_fn is not None and model.weight.grad is not None"),
        Shape(ATTACK.format(v="V = nn.Linear(4, 4)", wrap="V(x)"), "GT506", line=5,
              raises=(RuntimeError, "second time"))),
    "sample-scored-only-for-detached-weights": (
        Shape(IMPORTANCE.format(detach=".detach()"), "GT720",
              holds="not hs.requires_grad and enc.weight.grad is not None"),
        Shape(IMPORTANCE.format(detach=""), "GT720", line=5, holds="not hs.requires_grad")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
