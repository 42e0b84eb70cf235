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
    # another spelling: `torch.autograd.backward(loss)`, an encoder shared by two heads on two
    # batches, the first head's optimizer holding the encoder too. Look-alike: the step comes
    # after both backward passes
    "autograd-backward-shared-encoder": (Shape(NETS + """
        enc, h1, h2 = mlp(4, 8), mlp(8, 1), mlp(8, 1)
        opt1 = torch.optim.SGD([*enc.parameters(), *h1.parameters()], lr=0.1)
        x1, x2 = torch.randn(8, 4), torch.randn(8, 4)
        loss1 = h1(enc(x1)).pow(2).mean()
        loss2 = h2(enc(x2)).abs().mean()
        torch.autograd.backward(loss1)
        torch.autograd.backward(loss2)
        opt1.step()
        """, "GT609"), Shape(NETS + """
        enc, h1, h2 = mlp(4, 8), mlp(8, 1), mlp(8, 1)
        opt1 = torch.optim.SGD(enc.parameters(), lr=0.1)
        x1, x2 = torch.randn(8, 4), torch.randn(8, 4)
        loss1 = h1(enc(x1)).pow(2).mean()
        loss2 = h2(enc(x2)).abs().mean()
        torch.autograd.backward(loss1)
        opt1.step()
        torch.autograd.backward(loss2)
        """, "GT609", 9, raises=INPLACE)),
}

# look-alikes without a twin of their own: the critic's step in one branch and the actor's
# backward in the other (the merged code is the twin "script-loop-actor-critic")
SILENT = {
    "exclusive-branches": Shape(NETS + """
        actor, critic = mlp(4, 2), mlp(6, 1)
        actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
        critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
        for it in range(4):
            s, a, y = torch.randn(8, 4), torch.randn(8, 2), torch.randn(8, 1)
            actor_loss = -critic(torch.cat([s, actor(s)], 1)).mean()
            critic_loss = F.mse_loss(critic(torch.cat([s, a], 1)), y)
            if it % 2 == 0:
                critic_opt.zero_grad()
                critic_loss.backward()
                critic_opt.step()
            else:
                actor_opt.zero_grad()
                actor_loss.backward()
                actor_opt.step()
        """, "GT609"),
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_branch_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SILENT[name])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# GT535: "a function runs backward on a loss and returns it; its caller (or Lightning under
# automatic optimization) runs backward on the returned loss again"
TWICE = (RuntimeError, "backward through the graph a second time")

RETURNED: dict[str, tuple[Shape, Shape]] = {
    # a script loop calling a helper function. Look-alike: the caller only logs the loss
    "script-helper-function": (Shape(NETS + """
        def train_batch(model, x, y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss
        model = mlp(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for it in range(2):
            opt.zero_grad()
            loss = train_batch(model, torch.randn(8, 4), torch.randn(8, 1))
            print(loss.item())
            opt.step()
        """, "GT535"), Shape(NETS + """
        def train_batch(model, x, y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss
        model = mlp(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for it in range(2):
            opt.zero_grad()
            loss = train_batch(model, torch.randn(8, 4), torch.randn(8, 1))
            loss.backward()
            opt.step()
        """, "GT535", 5, raises=TWICE)),
    # a trainer class whose per-batch method backpropagates, its fit loop backpropagating the
    # result again. Look-alike: the per-batch method only computes the loss
    "trainer-method": (Shape(NETS + """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            def compute(self, batch):
                x, y = batch
                loss = F.mse_loss(self.model(x), y)
                return loss
            def fit(self, batches):
                for batch in batches:
                    self.opt.zero_grad()
                    loss = self.compute(batch)
                    loss.backward()
                    self.opt.step()
        Trainer(mlp(4, 1)).fit([(torch.randn(8, 4), torch.randn(8, 1))] * 2)
        """, "GT535"), Shape(NETS + """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            def compute(self, batch):
                x, y = batch
                loss = F.mse_loss(self.model(x), y)
                loss.backward()
                return loss
            def fit(self, batches):
                for batch in batches:
                    self.opt.zero_grad()
                    loss = self.compute(batch)
                    loss.backward()
                    self.opt.step()
        Trainer(mlp(4, 1)).fit([(torch.randn(8, 4), torch.randn(8, 1))] * 2)
        """, "GT535", 10, raises=TWICE)),
    # a module's own `training_step`, called by a hand-written loop on an instance, that
    # skips the first batch (returns None). Look-alike: the loop skips None and does not
    # backpropagate again
    "module-training-step-skips-batch": (Shape(NETS + """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = mlp(4, 1)
                self.seen = 0
            def training_step(self, x):
                self.seen += 1
                if self.seen > 1:
                    loss = self.body(x).pow(2).mean()
                    loss.backward()
                else:
                    loss = None
                return loss
        def fit(model, data):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in data:
                opt.zero_grad()
                loss = model.training_step(x)
                if loss is None:
                    continue
                opt.step()
        fit(Net(), [torch.randn(8, 4)] * 3)
        """, "GT535"), Shape(NETS + """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = mlp(4, 1)
                self.seen = 0
            def training_step(self, x):
                self.seen += 1
                if self.seen > 1:
                    loss = self.body(x).pow(2).mean()
                    loss.backward()
                else:
                    loss = None
                return loss
        def fit(model, data):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in data:
                opt.zero_grad()
                loss = model.training_step(x)
                if loss is None:
                    continue
                loss.backward()
                opt.step()
        fit(Net(), [torch.randn(8, 4)] * 3)
        """, "GT535", 12, raises=TWICE)),
    # Lightning under automatic optimization, the loss returned in a dict. Look-alike: the
    # same backward under manual optimization (`self.manual_backward`), returning the loss
    "lightning-training-step": (Shape(NETS + """
        import lightning as L
        class Lit(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False
                self.body = mlp(4, 1)
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                opt.zero_grad()
                loss = self.body(batch).pow(2).mean()
                self.manual_backward(loss)
                opt.step()
                return {"loss": loss}
            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)
        L.Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False, accelerator="cpu").fit(
            Lit(), torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4))
        """, "GT535"), Shape(NETS + """
        import lightning as L
        class Lit(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.body = mlp(4, 1)
            def training_step(self, batch, batch_idx):
                loss = self.body(batch).pow(2).mean()
                loss.backward()
                return {"loss": loss}
            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)
        L.Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False, accelerator="cpu").fit(
            Lit(), torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4))
        """, "GT535", 10, raises=TWICE)),
}


@pytest.mark.parametrize("name", sorted(RETURNED))
def test_returned_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, RETURNED[name][0])


@pytest.mark.parametrize("name", sorted(RETURNED))
def test_returned_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, RETURNED[name][1])
