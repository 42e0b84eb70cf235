"""Shapes that fired wrongly on the projects of docs/triage/unseen38b.md (session 38), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
from collections import namedtuple
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # andri27-ts/Reinforcement-Learning (`Week4/A2C.ipynb`): `def calculate_loss(memories, nn,
    # writer)` calls `nn(...)`, its own parameter (the agent), after `import torch.nn as nn`;
    # read as `torch.nn`, the call was a torch function whose result came from the NumPy-made
    # input only. Twin: the model's output itself goes through NumPy (the report moves there)
    "parameter-named-like-an-imported-module": (Shape("""
        Memory = namedtuple("Memory", ["obs", "reward"])
        def calculate_loss(memories, nn):
            rewards = torch.tensor(np.array([m.reward for m in memories], dtype=np.float32))
            log_val = nn(torch.tensor(np.array([m.obs for m in memories], dtype=np.float32)))
            return F.mse_loss(log_val.squeeze(-1), rewards)
        agent = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
        memories = [Memory(np.random.rand(4), 1.0) for _ in range(8)]
        before = agent[0].weight.detach().clone()
        for _ in range(2):
            loss = calculate_loss(memories, agent)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT103", holds="not torch.equal(before, agent[0].weight)"), Shape("""
        Memory = namedtuple("Memory", ["obs", "reward"])
        def calculate_loss(memories, nn):
            rewards = torch.tensor(np.array([m.reward for m in memories], dtype=np.float32))
            log_val = nn(torch.tensor(np.array([m.obs for m in memories], dtype=np.float32)))
            clipped = torch.as_tensor(np.clip(log_val, -1.0, 1.0))
            return F.mse_loss(clipped.squeeze(-1), rewards)
        agent = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
        memories = [Memory(np.random.rand(4), 1.0) for _ in range(8)]
        for _ in range(2):
            loss = calculate_loss(memories, agent)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT103", line=5, raises=(RuntimeError, "Can't call numpy"))),
    # XinJingHao/SAC-Continuous-Pytorch (`SAC.py`): `self.__dict__.update(kwargs)` then
    # `self.log_alpha = torch.tensor(np.log(self.alpha), requires_grad=True)` in `__init__`;
    # `train()` stores `self.alpha = self.log_alpha.exp()` later, which cannot reach the
    # constructor. Twin: the constructor first calls the method that stores the tensor
    "constructor-reads-a-setting-before-train-stores-a-tensor-there": (Shape("""
        class Agent:
            def __init__(self, **kwargs):
                self.__dict__.update(kwargs)
                self.actor = nn.Linear(3, 2)
                self.actor_opt = torch.optim.SGD(self.actor.parameters(), lr=0.1)
                self.log_alpha = torch.tensor(np.log(self.alpha), requires_grad=True)
                self.alpha_opt = torch.optim.SGD([self.log_alpha], lr=0.1)
            def train(self, s):
                logp = F.log_softmax(self.actor(s), -1)
                a_loss = (self.alpha * logp).mean()
                self.actor_opt.zero_grad()
                a_loss.backward()
                self.actor_opt.step()
                alpha_loss = -(self.log_alpha * (logp + 1.0).detach()).mean()
                self.alpha_opt.zero_grad()
                alpha_loss.backward()
                self.alpha_opt.step()
                self.alpha = self.log_alpha.exp()
        agent = Agent(alpha=0.2)
        before = agent.log_alpha.detach().clone()
        for _ in range(2):
            agent.train(torch.randn(4, 3))
        """, "GT103", holds="not torch.equal(before, agent.log_alpha)"), Shape("""
        class Agent:
            def __init__(self, **kwargs):
                self.__dict__.update(kwargs)
                self.actor = nn.Linear(3, 2)
                self.raw = torch.tensor(0.5, requires_grad=True)
                self.update_alpha()
                self.log_alpha = torch.tensor(np.log(self.alpha), requires_grad=True)
                self.alpha_opt = torch.optim.SGD([self.log_alpha], lr=0.1)
            def update_alpha(self):
                self.alpha = self.raw.exp()
            def train(self, s):
                logp = F.log_softmax(self.actor(s), -1)
                alpha_loss = -(self.log_alpha * (logp + 1.0).detach()).mean()
                self.alpha_opt.zero_grad()
                alpha_loss.backward()
                self.alpha_opt.step()
        agent = Agent(alpha=0.2)
        agent.train(torch.randn(4, 3))
        """, "GT103", line=7, raises=(RuntimeError, "Can't call numpy"))),
    # andri27-ts/Reinforcement-Learning (`Week5/PPO.py`): `pol_loss, val_loss =
    # clipped_PPO_loss(batch, agent_policy, agent_value, ...)`, a function of the file whose
    # value loss reads only its `nn_value` argument; the policy steps between the two
    # backwards. Twin: the value loss also runs the policy (a second forward it saved)
    "tuple-of-losses-from-a-function-each-reading-its-own-network": (Shape("""
        def ppo_loss(obs, rewards, nn_policy, nn_value, old_logp, adv):
            value = nn_value(obs)
            vl_loss = F.mse_loss(value.squeeze(-1), rewards)
            ratio = torch.exp(nn_policy(obs).squeeze(-1) - old_logp.detach())
            pg_loss = -torch.mean(torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv))
            return pg_loss, vl_loss
        policy = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        opt_policy = torch.optim.Adam(policy.parameters())
        opt_value = torch.optim.Adam(critic.parameters())
        for _ in range(2):
            obs, rewards, old_logp, adv = torch.randn(4, 3), torch.randn(4), torch.randn(4), torch.randn(4)
            pol_loss, val_loss = ppo_loss(obs, rewards, policy, critic, old_logp, adv)
            opt_policy.zero_grad()
            pol_loss.backward()
            opt_policy.step()
            opt_value.zero_grad()
            val_loss.backward()
            opt_value.step()
        """, "GT609"), Shape("""
        def ppo_loss(obs, rewards, nn_policy, nn_value, old_logp, adv):
            value = nn_value(obs) + nn_policy(obs)
            vl_loss = F.mse_loss(value.squeeze(-1), rewards)
            ratio = torch.exp(nn_policy(obs).squeeze(-1) - old_logp.detach())
            pg_loss = -torch.mean(torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv))
            return pg_loss, vl_loss
        policy = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        opt_policy = torch.optim.Adam(policy.parameters())
        opt_value = torch.optim.Adam(critic.parameters())
        for _ in range(2):
            obs, rewards, old_logp, adv = torch.randn(4, 3), torch.randn(4), torch.randn(4), torch.randn(4)
            pol_loss, val_loss = ppo_loss(obs, rewards, policy, critic, old_logp, adv)
            opt_policy.zero_grad()
            pol_loss.backward()
            opt_policy.step()
            opt_value.zero_grad()
            val_loss.backward()
            opt_value.step()
        """, "GT609", line=16, raises=(RuntimeError, "modified by an inplace operation"))),
    # autonomousvision/stylegan-t (`training/training_loop.py`): each phase turns its module's
    # gradients on, accumulates them, turns them off again and steps: the freeze closes the
    # bracket (the next phase's backward must not write into it), this step is meant to apply
    # them. Twin: the part frozen after the backward is not the one unfrozen before it
    "phase-unfreezes-backwards-freezes-then-steps": (Shape("""
        G, D = nn.Linear(3, 3), nn.Linear(3, 1)
        G.requires_grad_(False)
        D.requires_grad_(False)
        g_opt = torch.optim.SGD(G.parameters(), lr=0.1)
        d_opt = torch.optim.SGD(D.parameters(), lr=0.1)
        phases = [("G", G, g_opt), ("D", D, d_opt)]
        before = G.weight.detach().clone()
        for _ in range(2):
            for name, module, opt in phases:
                module.requires_grad_(True)
                x = torch.randn(4, 3)
                loss = -D(G(x)).mean() if name == "G" else D(G(x)).mean()
                loss.backward()
                module.requires_grad_(False)
                opt.step()
                opt.zero_grad(set_to_none=True)
        """, "GT441", holds="not torch.equal(before, G.weight) and D.weight.grad is None"), Shape("""
        G, D = nn.Linear(3, 3), nn.Linear(3, 1)
        opt = torch.optim.SGD([*G.parameters(), *D.parameters()], lr=0.1)
        before = D.weight.detach().clone()
        for _ in range(1):
            G.requires_grad_(True)
            loss = -D(G(torch.randn(4, 3))).mean()
            loss.backward()
            D.requires_grad_(False)
            opt.step()
            opt.zero_grad(set_to_none=True)
        """, "GT441", line=8, holds="not torch.equal(before, D.weight)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_accumulator_made_anew_each_epoch_says_until_when() -> None:
    """LAMDA-PILOT (`models/mos.py`): `losses = 0.0` at each epoch, `losses += loss` per class
    inside: the graphs are kept until the next epoch rebinds `losses`, not without bound."""
    from gradtrace.lint import check_source
    src = PRELUDE + (
        "model = nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for epoch in range(2):\n"
        "    losses = 0.0\n"
        "    for x, y in [(torch.randn(8, 4), torch.randint(0, 2, (8,)))] * 3:\n"
        "        loss = F.cross_entropy(model(x), y)\n"
        "        opt.zero_grad()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        losses += loss\n"
        "for x, y in [(torch.randn(8, 4), torch.randint(0, 2, (8,)))] * 3:\n"
        "    loss = F.cross_entropy(model(x), y)\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    losses += loss\n")
    found = sorted(check_source(src, "shape.py", select=["GT505"]), key=lambda f: f.line)
    offset = PRELUDE.count("\n")
    assert [(f.line - offset, f.code) for f in found] == [(10, "GT505"), (16, "GT505")]
    assert f"until `losses` is made anew (line {4 + offset})" in found[0].message
    assert "without bound" in found[1].message
