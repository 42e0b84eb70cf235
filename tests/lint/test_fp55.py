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

SHAPES = {
    "flow-inverse-named-backward-mirrors-forward": (
        Shape(MIRROR.format(init="torch.linalg.inv(self.mix)"), "GT795", holds="inverse"),
        Shape(MIRROR.format(init="-torch.eye(n)"), "GT795", line=1,
              holds="rule_unused and not inverse")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
