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

# two networks, each with its own optimizer, trained in one loop; the generator's step
# replaced by its scheduler's in the twin (NOTE [an optimizer over other modules])
TWO_NETS = '''
def train(batches):
    net_g, net_f = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=0.1)
    opt_f = torch.optim.Adam(net_f.parameters(), lr=0.1)
    sched_g = torch.optim.lr_scheduler.ExponentialLR(opt_g, 0.9)
    before = net_g.weight.detach().clone()
    for x, y in batches:
        opt_g.zero_grad()
        loss_g = ((net_g(x) - x) ** 2).mean()
        loss_g.backward()
        {step}
        opt_f.zero_grad()
        loss_f = ((net_f(net_g(x).detach()) - y) ** 2).mean()
        loss_f.backward()
        opt_f.step()
    return not torch.equal(before, net_g.weight)


moved = train([(torch.randn(8, 4), torch.randn(8, 1))] * 3)
'''

SHAPES = {
    "value-loss-backpropagated-on-the-other-arm-of-one-setting": (
        Shape(ARMS.format(guard="not self.hps.shared_value", shared=False), "GT609"),
        Shape(ARMS.format(guard="self.hps.fit_value", shared=True), "GT609", line=24,
              raises=(RuntimeError, "inplace operation"))),
    "scheduler-stepped-beside-an-optimizer-over-another-network": (
        Shape(TWO_NETS.format(step="opt_g.step()"), "GT544", holds="moved"),
        Shape(TWO_NETS.format(step="sched_g.step()"), "GT544", line=11, holds="not moved")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


# a temperature loss built before the policy's step, backpropagated after it, in a class of
# its own file handed the policy's optimizer by another file (its owners unknown there): the
# loss is linear in its leaf, its product's other factor without a graph
# (NOTE [a loss linear in its leaves])
LEARNER = '''
import torch


class Learner:
    def __init__(self, policy, policy_optim, target):
        self.policy, self.policy_optim, self.target = policy, policy_optim, target
        self.log_coef = torch.tensor(0.0, requires_grad=True)
        self.coef_optim = torch.optim.Adam([self.log_coef], lr=1e-2)

    def update(self, batches):
        for x in batches:
            logp = self.policy(x).log_softmax(-1)
            ent = -(logp.exp() * logp).sum(-1).mean()
            coef_loss = -self.log_coef * (self.target - {ent})
            p_loss = -ent
            self.policy_optim.zero_grad()
            p_loss.backward(retain_graph=True)
            self.policy_optim.step()
            self.coef_optim.zero_grad()
            coef_loss.backward()
            self.coef_optim.step()
'''

RUN = '''
import torch
import torch.nn as nn
from learner55 import Learner

policy = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
optim = torch.optim.Adam(policy.parameters(), lr=1e-2)
Learner(policy, optim, -1.0).update([torch.randn(5, 3)])
'''


@pytest.mark.parametrize("ent,line", [("ent.detach()", None), ("ent", 19)])
def test_temperature_loss_linear_in_its_leaf(tmp_path, monkeypatch, ent: str,
                                             line: int | None) -> None:
    import sys
    from gradtrace.lint.config import Settings
    from gradtrace.lint import check_paths
    (tmp_path / "learner55.py").write_text(LEARNER.format(ent=ent))
    (tmp_path / "run.py").write_text(RUN)
    found = [f for f in check_paths([str(tmp_path)], Settings()).findings if f.code == "GT601"]
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT601")])
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("learner55", None)
    env: dict = {}
    try:
        if line is None:
            exec(compile(RUN, str(tmp_path / "run.py"), "exec"), env)
        else:
            with pytest.raises(RuntimeError, match="inplace operation"):
                exec(compile(RUN, str(tmp_path / "run.py"), "exec"), env)
    finally:
        sys.modules.pop("learner55", None)
