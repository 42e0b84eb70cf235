"""Readings of docs/triage/static23a.md, written from the mechanism's sentence before reading
the code of the cases it came from: "an optimizer steps after a loss was computed through its
parameters and before that loss's backward" (the step writes in place the parameters the
loss's graph saved). Buggy twins in several shapes (a script loop, a method of an agent class,
a helper function one call away, a list of optimizers stepped in a loop, another spelling of
backward) that real torch shows failing, and correct look-alikes of the same shape that run;
the checker reports the first and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

INPLACE = (RuntimeError, "modified by an inplace operation")

NETS = '''
        def mlp(i, o):
            return nn.Sequential(nn.Linear(i, 16), nn.ReLU(), nn.Linear(16, o))'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # a script loop: the actor's loss (through the critic) is built before the critic steps.
    # Look-alike: built after the critic's step
    "script-loop-actor-critic": (Shape(NETS + """
        actor, critic = mlp(4, 2), mlp(6, 1)
        actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
        critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
        for it in range(2):
            s, a, y = torch.randn(8, 4), torch.randn(8, 2), torch.randn(8, 1)
            critic_loss = F.mse_loss(critic(torch.cat([s, a], 1)), y)
            critic_opt.zero_grad()
            critic_loss.backward()
            critic_opt.step()
            actor_loss = -critic(torch.cat([s, actor(s)], 1)).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
        """, "GT609"), Shape(NETS + """
        actor, critic = mlp(4, 2), mlp(6, 1)
        actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
        critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
        for it in range(2):
            s, a, y = torch.randn(8, 4), torch.randn(8, 2), torch.randn(8, 1)
            actor_loss = -critic(torch.cat([s, actor(s)], 1)).mean()
            critic_loss = F.mse_loss(critic(torch.cat([s, a], 1)), y)
            critic_opt.zero_grad()
            critic_loss.backward()
            critic_opt.step()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
        """, "GT609", 12, raises=INPLACE)),
    # a method of an agent class, optimizers on `self`, built from constructor arguments.
    # Look-alike: the actor steps first, and the critic's loss (on stored actions) holds no
    # actor parameter
    "agent-method": (Shape(NETS + """
        class Agent:
            def __init__(self, actor, critic):
                self.actor, self.critic = actor, critic
                self.actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
                self.critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
            def update(self, s, a, y):
                actor_loss = -self.critic(torch.cat([s, self.actor(s)], 1)).mean()
                critic_loss = F.mse_loss(self.critic(torch.cat([s, a], 1)), y)
                self.actor_opt.zero_grad()
                actor_loss.backward()
                self.actor_opt.step()
                self.critic_opt.zero_grad()
                critic_loss.backward()
                self.critic_opt.step()
        agent = Agent(mlp(4, 2), mlp(6, 1))
        agent.update(torch.randn(8, 4), torch.randn(8, 2), torch.randn(8, 1))
        """, "GT609"), Shape(NETS + """
        class Agent:
            def __init__(self, actor, critic):
                self.actor, self.critic = actor, critic
                self.actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
                self.critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
            def update(self, s, a, y):
                actor_loss = -self.critic(torch.cat([s, self.actor(s)], 1)).mean()
                critic_loss = F.mse_loss(self.critic(torch.cat([s, a], 1)), y)
                self.critic_opt.zero_grad()
                critic_loss.backward()
                self.critic_opt.step()
                self.actor_opt.zero_grad()
                actor_loss.backward()
                self.actor_opt.step()
        agent = Agent(mlp(4, 2), mlp(6, 1))
        agent.update(torch.randn(8, 4), torch.randn(8, 2), torch.randn(8, 1))
        """, "GT609", 13, raises=INPLACE)),
    # a helper function one call away runs zero_grad/backward/step on what it is given; a
    # GAN's generator loss (through D) is built before D's update. Look-alike: built after
    "helper-update-gan": (Shape(NETS + """
        def apply(loss, opt):
            opt.zero_grad()
            loss.backward()
            opt.step()
        def train(G, D, real, z):
            opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
            opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
            fake = G(z)
            d_loss = F.softplus(-D(real)).mean() + F.softplus(D(fake.detach())).mean()
            apply(d_loss, opt_d)
            g_loss = F.softplus(-D(fake)).mean()
            apply(g_loss, opt_g)
        train(mlp(3, 5), mlp(5, 1), torch.randn(8, 5), torch.randn(8, 3))
        """, "GT609"), Shape(NETS + """
        def apply(loss, opt):
            opt.zero_grad()
            loss.backward()
            opt.step()
        def train(G, D, real, z):
            opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
            opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
            fake = G(z)
            d_loss = F.softplus(-D(real)).mean() + F.softplus(D(fake.detach())).mean()
            g_loss = F.softplus(-D(fake)).mean()
            apply(d_loss, opt_d)
            apply(g_loss, opt_g)
        train(mlp(3, 5), mlp(5, 1), torch.randn(8, 5), torch.randn(8, 3))
        """, "GT609", 13, raises=INPLACE)),
    # an ensemble: one optimizer per Q network in a list, stepped in a loop over zip; the
    # policy loss through every Q network was built before. Look-alike: built after the loop
    "ensemble-optimizer-list": (Shape(NETS + """
        class Ensemble:
            def __init__(self, n=2):
                self.pi = mlp(4, 2)
                self.qs = [mlp(6, 1) for _ in range(n)]
                self.q_opts = [torch.optim.Adam(q.parameters(), lr=1e-3) for q in self.qs]
                self.pi_opt = torch.optim.Adam(self.pi.parameters(), lr=1e-3)
            def policy_loss(self, s):
                a = self.pi(s)
                return -torch.stack([q(torch.cat([s, a], 1)) for q in self.qs]).min(0)[0].mean()
            def update(self, s, a, y):
                q_losses = [F.mse_loss(q(torch.cat([s, a], 1)), y) for q in self.qs]
                for loss, opt in zip(q_losses, self.q_opts):
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                pi_loss = self.policy_loss(s)
                self.pi_opt.zero_grad()
                pi_loss.backward()
                self.pi_opt.step()
        Ensemble().update(torch.randn(8, 4), torch.randn(8, 2), torch.randn(8, 1))
        """, "GT609"), Shape(NETS + """
        class Ensemble:
            def __init__(self, n=2):
                self.pi = mlp(4, 2)
                self.qs = [mlp(6, 1) for _ in range(n)]
                self.q_opts = [torch.optim.Adam(q.parameters(), lr=1e-3) for q in self.qs]
                self.pi_opt = torch.optim.Adam(self.pi.parameters(), lr=1e-3)
            def policy_loss(self, s):
                a = self.pi(s)
                return -torch.stack([q(torch.cat([s, a], 1)) for q in self.qs]).min(0)[0].mean()
            def update(self, s, a, y):
                pi_loss = self.policy_loss(s)
                q_losses = [F.mse_loss(q(torch.cat([s, a], 1)), y) for q in self.qs]
                for loss, opt in zip(q_losses, self.q_opts):
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                self.pi_opt.zero_grad()
                pi_loss.backward()
                self.pi_opt.step()
        Ensemble().update(torch.randn(8, 4), torch.randn(8, 2), torch.randn(8, 1))
        """, "GT609", 18, raises=INPLACE)),
    # another spelling: `torch.autograd.backward(loss)`, an encoder shared by two heads, the
    # first head's optimizer holding the encoder too. Look-alike: the step comes after both
    "autograd-backward-shared-encoder": (Shape(NETS + """
        enc, h1, h2 = mlp(4, 8), mlp(8, 1), mlp(8, 1)
        opt1 = torch.optim.SGD([*enc.parameters(), *h1.parameters()], lr=0.1)
        x = torch.randn(8, 4)
        feat = enc(x)
        loss1, loss2 = h1(feat).pow(2).mean(), h2(feat).abs().mean()
        torch.autograd.backward(loss1, retain_graph=True)
        torch.autograd.backward(loss2)
        opt1.step()
        """, "GT609"), Shape(NETS + """
        enc, h1, h2 = mlp(4, 8), mlp(8, 1), mlp(8, 1)
        opt1 = torch.optim.SGD(enc.parameters(), lr=0.1)
        x = torch.randn(8, 4)
        feat = enc(x)
        loss1, loss2 = h1(feat).pow(2).mean(), h2(feat).abs().mean()
        torch.autograd.backward(loss1, retain_graph=True)
        opt1.step()
        torch.autograd.backward(loss2)
        """, "GT609", 9, raises=INPLACE)),
    # exclusive branches: the critic's step in one branch, the actor's backward in the other
    # (no twin: the same code with the branches merged is "script-loop-actor-critic")
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
