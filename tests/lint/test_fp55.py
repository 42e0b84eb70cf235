"""False shapes of unseen code (docs/triage/fp55.md), each fixed at its mechanism: a silent
look-alike in another spelling than the project's, next to a buggy twin that stays reported;
all run on real torch."""
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

# a flow layer's inverse named `backward`: forward with the inverse matrix __init__ derives;
# the twin, a gradient reversal written the same way with a matrix not derived from forward's
MIRROR = '''
class Mix(nn.Module):
    def __init__(self, n):
        super().__init__()
        q = torch.linalg.qr(torch.randn(n, n))[0]
        self.register_buffer("mix", q)
        self.unmix = {init}

    def forward(self, x):
        return F.linear(x, self.mix)

    def backward(self, z):
        return F.linear(z, self.unmix)


layer = Mix(4)
x = torch.randn(3, 4, requires_grad=True)
layer(x).sum().backward()
inverse = torch.allclose(F.linear(layer(x), layer.unmix), x, atol=1e-5)
rule_unused = torch.allclose(x.grad, layer.mix.sum(0).expand(3, 4))
'''

# a dual variable held still in the network's loss, trained by its own optimizer and loss;
# the twin holds it in the network's optimizer and only ever reads it detached: it never moves
DUAL = '''
class Learner:
    def __init__(self):
        self.net = nn.Linear(4, 1)
        self.lam = torch.zeros((), requires_grad=True)
        self.opt = torch.optim.SGD({params}, lr=0.1)
        {lam_opt}

    def update(self, x, y):
        err = (self.net(x) - y).pow(2)
        loss = err.mean() + self.lam.detach()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        {lam_step}


learner = Learner()
learner.update(torch.randn(8, 4), torch.randn(8, 1) + 3)
moved = learner.lam.item() != 0.0
'''
OWN = dict(params="self.net.parameters()", lam_opt="self.lam_opt = torch.optim.Adam([self.lam])",
           lam_step="self.lam_opt.zero_grad(); (-self.lam * (err.detach().mean() - 0.1))"
                    ".backward(); self.lam_opt.step()")
SHARED = dict(params="[*self.net.parameters(), self.lam]", lam_opt="", lam_step="")

SHAPES = {
    "flow-inverse-named-backward-mirrors-forward": (
        Shape(MIRROR.format(init="torch.linalg.inv(self.mix)"), "GT795", holds="inverse"),
        Shape(MIRROR.format(init="-torch.eye(n)"), "GT795", line=1,
              holds="rule_unused and not inverse")),
    "leaf-with-its-own-optimizer-detached-in-the-network-loss": (
        Shape(DUAL.format(**OWN), "GT107", holds="moved"),
        Shape(DUAL.format(**SHARED), "GT107", line=10, holds="not moved")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
