"""Shapes from the projects of docs/triage/unseen55b.md (session 55), each in another
spelling than the project's and next to a buggy twin that is still reported; all run on real
torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

# the value head shares the policy's body under one setting; the value loss is backpropagated
# after the policy's step only under the other setting (NOTE [arms of one flag])
ARMS = '''
class Settings:
    def __init__(self, shared_value, fit_value):
        self.shared_value, self.fit_value = shared_value, fit_value


class Agent:
    def __init__(self, hps):
        self.hps = hps
        self.policy = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.value = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.p_opt = torch.optim.SGD(self.policy.parameters(), lr=0.1)
        self.v_opt = torch.optim.SGD(self.value.parameters(), lr=0.1)

    def update(self, s):
        if self.hps.shared_value:
            v = self.policy(s)
        else:
            v = self.value(s)
        v_err = (v - 1.0).pow(2)
        v_loss = v_err.mean()
        p_loss = self.policy(s).mean()
        self.p_opt.zero_grad()
        p_loss.backward()
        self.p_opt.step()
        if {guard}:
            self.v_opt.zero_grad()
            v_loss.backward()
            self.v_opt.step()


Agent(Settings({shared}, True)).update(torch.randn(16, 4))
'''

SHAPES = {
    "value-loss-backpropagated-on-the-other-arm-of-one-setting": (
        Shape(ARMS.format(guard="not self.hps.shared_value", shared=False), "GT609"),
        Shape(ARMS.format(guard="self.hps.fit_value", shared=True), "GT609", line=24,
              raises=(RuntimeError, "inplace operation"))),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
