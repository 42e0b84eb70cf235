"""Loop protocol judged per optimizer (NOTE [two optimizers] in
``gradtrace/lint/rules/training_loop/step_early.py``): a backward() reaches the optimizers whose
models its loss is computed from, the step it needs belongs to those. GT522 names the step that
came before its own backward() (a GAN's generator stepped before ``errG.backward()``, an
actor-critic step function stepping before its backward()), not the other optimizer whose
gradients that loss also touches; GT503 does not count a backward() that reaches only another
optimizer's model. Each buggy twin really fails on torch (``holds``); each look-alike is correct
code that runs and stays silent. Same harness as test_heldout3_mechanisms.py, but every
loop-order code is checked at once (the wrong optimizer's line is the defect looked for).
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import PRELUDE, Shape, _run, _source

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

CODES = ["GT501", "GT502", "GT503", "GT512", "GT518", "GT522"]


def _all(shape: Shape) -> list[tuple[int, str]]:
    found = check_source(_source(shape), "shape.py", select=CODES)
    offset = PRELUDE.count("\n")
    return sorted((f.line - offset, f.code) for f in found)


BUGGY = [
    # dcgan: optimizerG.step() moved before errG.backward(); errG also reaches netD, whose step
    # came earlier too, but D's own backward()s feed its step: G's is the early one
    Shape("""
        netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
        optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-2)
        optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-2)
        g0 = netG.weight.detach().clone()
        for _ in range(3):
            netD.zero_grad()
            errD_real = F.softplus(-netD(torch.randn(5, 6))).mean()
            errD_real.backward()
            fake = netG(torch.randn(5, 4))
            errD_fake = F.softplus(netD(fake.detach())).mean()
            errD_fake.backward()
            optimizerD.step()
            netG.zero_grad()
            errG = F.softplus(-netD(fake)).mean()
            optimizerG.step()
            errG.backward()
        """, "GT522", 15, holds="torch.equal(netG.weight, g0)"),
    # the same in a trainer class, cleared through the optimizers, the loss through a helper
    Shape("""
        class GanTrainer:
            def __init__(self):
                self.gen, self.disc = nn.Linear(4, 6), nn.Linear(6, 1)
                self.opt_g = torch.optim.SGD(self.gen.parameters(), lr=0.1)
                self.opt_d = torch.optim.SGD(self.disc.parameters(), lr=0.1)

            def fit(self, batches):
                for real, z in batches:
                    self.opt_d.zero_grad()
                    fake = self.gen(z)
                    loss_d = self.disc(fake.detach()).mean() - self.disc(real).mean()
                    loss_d.backward()
                    self.opt_d.step()
                    self.opt_g.zero_grad()
                    score = self.disc(fake)
                    self.opt_g.step()
                    loss_g = -score.mean()
                    loss_g.backward()

        t = GanTrainer()
        w0 = t.gen.weight.detach().clone()
        t.fit([(torch.randn(3, 6), torch.randn(3, 4)) for _ in range(3)])
        """, "GT522", 16, holds="torch.equal(t.gen.weight, w0)"),
    # actor-critic step function (called once per episode): clear, step, then backward
    Shape("""
        policy = nn.Linear(4, 3)
        optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
        p0 = policy.weight.detach().clone()

        def finish_episode(states, actions, returns):
            losses = []
            for s, a, r in zip(states, actions, returns):
                log_prob = F.log_softmax(policy(s), -1)[a]
                losses.append(-log_prob * r)
            optimizer.zero_grad()
            loss = torch.stack(losses).sum()
            optimizer.step()
            loss.backward()

        for _ in range(3):
            finish_episode(torch.randn(5, 4), [0, 1, 2, 1, 0], torch.randn(5))
        """, "GT522", 12, holds="torch.equal(policy.weight, p0)"),
    # GT503 still fires for the optimizer whose own backward() the clear erases
    Shape("""
        netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
        optimizerD = torch.optim.SGD(netD.parameters(), lr=0.1)
        optimizerG = torch.optim.SGD(netG.parameters(), lr=0.1)
        g0 = netG.weight.detach().clone()
        for _ in range(3):
            optimizerD.zero_grad()
            fake = netG(torch.randn(5, 4))
            errD = netD(fake.detach()).mean() - netD(torch.randn(5, 6)).mean()
            errD.backward()
            optimizerD.step()
            errG = -netD(fake).mean()
            errG.backward()
            optimizerG.zero_grad()
            optimizerG.step()
        """, "GT503", 13, holds="torch.equal(netG.weight, g0)"),
]

# GT501 (NOTE [one optimizer never cleared]): a GAN clearing its discriminator through the
# module (``netD.zero_grad()``) and never its generator
BUGGY += [
    Shape("""
        netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
        optimizerD = torch.optim.SGD(netD.parameters(), lr=0.1)
        optimizerG = torch.optim.SGD(netG.parameters(), lr=0.1)
        for _ in range(3):
            netD.zero_grad()
            errD_real = F.softplus(-netD(torch.randn(5, 6))).mean()
            errD_real.backward()
            fake = netG(torch.randn(5, 4))
            errD_fake = F.softplus(netD(fake.detach())).mean()
            errD_fake.backward()
            optimizerD.step()
            errG = F.softplus(-netD(fake)).mean()
            errG.backward()
            optimizerG.step()
        """, "GT501", 13, holds="netG.weight.grad.abs().sum() > 0"),
    Shape("""
        class Adversarial:
            def __init__(self):
                self.encoder, self.critic = nn.Linear(4, 4), nn.Linear(4, 1)
                self.opt_enc = torch.optim.Adam(self.encoder.parameters(), lr=1e-3)
                self.opt_critic = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

            def train_epoch(self, batches):
                for x in batches:
                    self.critic.zero_grad()
                    z = self.encoder(x)
                    critic_loss = self.critic(z.detach()).mean()
                    critic_loss.backward()
                    self.opt_critic.step()
                    enc_loss = (x - z).pow(2).mean() - self.critic(z).mean()
                    enc_loss.backward()
                    self.opt_enc.step()

        a = Adversarial()
        a.train_epoch([torch.randn(3, 4) for _ in range(3)])
        """, "GT501", 15, holds="a.encoder.weight.grad is not None"),
]

LOOKALIKES = [
    # a correct GAN, generator first, then the discriminator on the detached fake
    Shape("""
        G, D = nn.Linear(4, 6), nn.Linear(6, 1)
        opt_g = torch.optim.Adam(G.parameters(), lr=1e-2)
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-2)
        g0 = G.weight.detach().clone()
        for _ in range(3):
            z, real = torch.randn(5, 4), torch.randn(5, 6)
            opt_g.zero_grad()
            fake = G(z)
            loss_g = -D(fake).mean()
            loss_g.backward()
            opt_g.step()
            opt_d.zero_grad()
            loss_d = D(fake.detach()).mean() - D(real).mean()
            loss_d.backward()
            opt_d.step()
        """, "", holds="not torch.equal(G.weight, g0)"),
    # the dcgan order, correct: D's clear, D's backward()s, D's step, G's clear between
    Shape("""
        netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
        optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-2)
        optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-2)
        g0 = netG.weight.detach().clone()
        for _ in range(3):
            netD.zero_grad()
            errD_real = F.softplus(-netD(torch.randn(5, 6))).mean()
            errD_real.backward()
            fake = netG(torch.randn(5, 4))
            netG.zero_grad()
            errD_fake = F.softplus(netD(fake.detach())).mean()
            errD_fake.backward()
            optimizerD.step()
            errG = F.softplus(-netD(fake)).mean()
            errG.backward()
            optimizerG.step()
        """, "", holds="not torch.equal(netG.weight, g0)"),
    # a critic stepped twice per generator step (WGAN): the generator loss also reaches D
    Shape("""
        G, D = nn.Linear(4, 6), nn.Linear(6, 1)
        opt_g = torch.optim.RMSprop(G.parameters(), lr=1e-3)
        opt_d = torch.optim.RMSprop(D.parameters(), lr=1e-3)
        g0 = G.weight.detach().clone()
        for _ in range(3):
            for _ in range(2):
                opt_d.zero_grad()
                loss_d = D(G(torch.randn(5, 4)).detach()).mean() - D(torch.randn(5, 6)).mean()
                loss_d.backward()
                opt_d.step()
            opt_g.zero_grad()
            loss_g = -D(G(torch.randn(5, 4))).mean()
            loss_g.backward()
            opt_g.step()
        """, "", holds="not torch.equal(G.weight, g0)"),
    # actor-critic with two optimizers: both cleared, both backward()s, both steps
    Shape("""
        actor, critic = nn.Linear(4, 2), nn.Linear(4, 1)
        opt_a = torch.optim.Adam(actor.parameters(), lr=1e-2)
        opt_c = torch.optim.Adam(critic.parameters(), lr=1e-2)
        a0 = actor.weight.detach().clone()
        for _ in range(3):
            s, r = torch.randn(5, 4), torch.randn(5, 1)
            value = critic(s)
            advantage = (r - value).detach()
            log_prob = F.log_softmax(actor(s), -1)[:, :1]
            opt_a.zero_grad()
            opt_c.zero_grad()
            actor_loss = -(log_prob * advantage).mean()
            actor_loss.backward()
            critic_loss = F.mse_loss(value, r)
            critic_loss.backward()
            opt_a.step()
            opt_c.step()
        """, "", holds="not torch.equal(actor.weight, a0)"),
    # actor-critic step function with one optimizer, in the right order
    Shape("""
        policy = nn.Linear(4, 3)
        optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
        p0 = policy.weight.detach().clone()

        def finish_episode(states, actions, returns):
            losses = []
            for s, a, r in zip(states, actions, returns):
                log_prob = F.log_softmax(policy(s), -1)[a]
                losses.append(-log_prob * r)
            optimizer.zero_grad()
            loss = torch.stack(losses).sum()
            loss.backward()
            optimizer.step()

        for _ in range(3):
            finish_episode(torch.randn(5, 4), [0, 1, 2, 1, 0], torch.randn(5))
        """, "", holds="not torch.equal(policy.weight, p0)"),
    # both networks cleared through their modules
    Shape("""
        netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
        optimizerD = torch.optim.SGD(netD.parameters(), lr=0.1)
        optimizerG = torch.optim.SGD(netG.parameters(), lr=0.1)
        for _ in range(3):
            netD.zero_grad()
            fake = netG(torch.randn(5, 4))
            errD = netD(fake.detach()).mean() - netD(torch.randn(5, 6)).mean()
            errD.backward()
            optimizerD.step()
            netG.zero_grad()
            errG = -netD(fake).mean()
            errG.backward()
            optimizerG.step()
        """, "", holds="netG.weight.grad is not None"),
    # one model cleared through a wrapper of it: not known to leave the optimizer uncleared
    Shape("""
        class Wrap(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.module = m

            def forward(self, x):
                return self.module(x)

        model = nn.Linear(4, 1)
        wrapped = Wrap(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            wrapped.zero_grad()
            loss = wrapped(torch.randn(5, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
        """, "", holds="model.weight.grad is not None"),
]


@pytest.mark.parametrize("i", range(len(BUGGY)))
def test_buggy_twin_named_on_its_own_optimizer(i: int) -> None:
    bad = BUGGY[i]
    assert _all(bad) == [(bad.line, bad.code)], bad.src
    _run(bad)


@pytest.mark.parametrize("i", range(len(LOOKALIKES)))
def test_correct_two_optimizer_loop_is_silent(i: int) -> None:
    good = LOOKALIKES[i]
    assert _all(good) == [], good.src
    _run(good)
