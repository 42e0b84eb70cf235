"""Loop order at run time, per optimizer (NOTE [step before backward] in
``gradtrace/runtime/trace/loop_order.py``): an optimizer whose steps never find a
gradient is followed too, a step that finds none drops the backward() lines pending for it, and
of the optimizers a backward() reached the one that never applied a backward() is named (a
GAN's generator stepped before ``errG.backward()``), not the discriminator whose gradients that
loss also touches, nor "an optimizer over parameters its loss does not reach" at its
construction. The fuse matches GT827 to a static finding on the same line only. A generator
whose gradients are never cleared is seen although a label is refilled between the two steps
(a non-zero ``fill_`` clears nothing). Real torch,
in-process runs; each bug in two spellings, each look-alike correct code that stays silent."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""

# name -> (code, body); the cause line carries `# C`
BUGS = {
    "gan_generator_step_before_its_backward": ("GT827", """
netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-2)
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-2)
for _ in range(4):
    netD.zero_grad()
    errD_real = F.softplus(-netD(torch.randn(5, 6))).mean()
    errD_real.backward()
    fake = netG(torch.randn(5, 4))
    errD_fake = F.softplus(netD(fake.detach())).mean()
    errD_fake.backward()
    optimizerD.step()
    netG.zero_grad()
    errG = F.softplus(-netD(fake)).mean()
    optimizerG.step()  # C
    errG.backward()
"""),
    "gan_trainer_method_generator_step_early": ("GT827", """
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
            self.opt_g.step()  # C
            loss_g = -score.mean()
            loss_g.backward()

GanTrainer().fit([(torch.randn(3, 6), torch.randn(3, 4)) for _ in range(4)])
"""),
    "actor_critic_step_function_steps_before_backward": ("GT827", """
policy = nn.Linear(4, 3)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)

def finish_episode(states, actions, returns):
    losses = []
    for s, a, r in zip(states, actions, returns):
        log_prob = F.log_softmax(policy(s), -1)[a]
        losses.append(-log_prob * r)
    optimizer.zero_grad()
    loss = torch.stack(losses).sum()
    optimizer.step()  # C
    loss.backward()

for _ in range(4):
    finish_episode(torch.randn(5, 4), [0, 1, 2, 1, 0], torch.randn(5))
"""),
    "two_heads_one_stepped_before_its_loss": ("GT827", """
class Agent:
    def __init__(self):
        self.actor, self.critic = nn.Linear(4, 2), nn.Linear(4, 1)
        self.opt_actor = torch.optim.SGD(self.actor.parameters(), lr=0.1)
        self.opt_critic = torch.optim.SGD(self.critic.parameters(), lr=0.1)

    def update(self, s, r):
        self.opt_actor.zero_grad()
        self.opt_critic.zero_grad()
        value = self.critic(s)
        F.mse_loss(value, r).backward()
        self.opt_critic.step()
        self.opt_actor.step()  # C
        logp = F.log_softmax(self.actor(s), -1)[:, 0]
        (-(logp * (r.squeeze(1) - value.squeeze(1).detach()))).mean().backward()

agent = Agent()
for _ in range(4):
    agent.update(torch.randn(5, 4), torch.randn(5, 1))
"""),
}

# GT501 at run time: a generator never cleared, a non-zero fill (the GAN's label) between the
# two steps is no clear (NOTE [step before backward]); the cause is the generator's backward()
ACCUMULATE = {
    "gan_generator_zero_grad_removed_label_refilled": """
netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
optimizerD = torch.optim.SGD(netD.parameters(), lr=0.1)
optimizerG = torch.optim.SGD(netG.parameters(), lr=0.1)
label = torch.empty(5, 1)
for _ in range(4):
    netD.zero_grad()
    label.fill_(1.0)
    errD_real = F.binary_cross_entropy_with_logits(netD(torch.randn(5, 6)), label)
    errD_real.backward()
    fake = netG(torch.randn(5, 4))
    label.fill_(0.0)
    errD_fake = F.binary_cross_entropy_with_logits(netD(fake.detach()), label)
    errD_fake.backward()
    optimizerD.step()
    label.fill_(1.0)
    errG = F.binary_cross_entropy_with_logits(netD(fake), label)
    errG.backward()  # C
    optimizerG.step()
""",
    "encoder_critic_method_encoder_never_cleared": """
class Adversarial:
    def __init__(self):
        self.encoder, self.critic = nn.Linear(4, 4), nn.Linear(4, 1)
        self.opt_enc = torch.optim.Adam(self.encoder.parameters(), lr=1e-3)
        self.opt_critic = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.target = torch.zeros(3, 1)

    def train_epoch(self, batches):
        for x in batches:
            self.opt_critic.zero_grad()
            z = self.encoder(x)
            F.mse_loss(self.critic(z.detach()), self.target).backward()
            self.opt_critic.step()
            self.target.fill_(2.0)
            enc_loss = (x - z).pow(2).mean() - self.critic(z).mean()
            enc_loss.backward()  # C
            self.opt_enc.step()

Adversarial().train_epoch([torch.randn(3, 4) for _ in range(4)])
""",
}

LOOKALIKES = {
    "gan_labels_refilled_both_cleared": """
netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
optimizerD = torch.optim.SGD(netD.parameters(), lr=0.1)
optimizerG = torch.optim.SGD(netG.parameters(), lr=0.1)
label = torch.empty(5, 1)
for _ in range(4):
    netD.zero_grad()
    label.fill_(1.0)
    errD_real = F.binary_cross_entropy_with_logits(netD(torch.randn(5, 6)), label)
    errD_real.backward()
    fake = netG(torch.randn(5, 4))
    label.fill_(0.0)
    errD_fake = F.binary_cross_entropy_with_logits(netD(fake.detach()), label)
    errD_fake.backward()
    optimizerD.step()
    netG.zero_grad()
    label.fill_(1.0)
    errG = F.binary_cross_entropy_with_logits(netD(fake), label)
    errG.backward()
    optimizerG.step()
""",
    "gan_generator_first_then_discriminator": """
G, D = nn.Linear(4, 6), nn.Linear(6, 1)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-2)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-2)
for _ in range(4):
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
""",
    "dcgan_order_correct": """
netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-2)
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-2)
for _ in range(4):
    netD.zero_grad()
    errD_real = F.softplus(-netD(torch.randn(5, 6))).mean()
    errD_real.backward()
    fake = netG(torch.randn(5, 4))
    errD_fake = F.softplus(netD(fake.detach())).mean()
    errD_fake.backward()
    optimizerD.step()
    netG.zero_grad()
    errG = F.softplus(-netD(fake)).mean()
    errG.backward()
    optimizerG.step()
""",
    "critic_stepped_twice_per_generator_step": """
G, D = nn.Linear(4, 6), nn.Linear(6, 1)
opt_g = torch.optim.RMSprop(G.parameters(), lr=1e-3)
opt_d = torch.optim.RMSprop(D.parameters(), lr=1e-3)
for _ in range(4):
    for _ in range(2):
        opt_d.zero_grad()
        loss_d = D(G(torch.randn(5, 4)).detach()).mean() - D(torch.randn(5, 6)).mean()
        loss_d.backward()
        opt_d.step()
    opt_g.zero_grad()
    loss_g = -D(G(torch.randn(5, 4))).mean()
    loss_g.backward()
    opt_g.step()
""",
    "actor_critic_two_optimizers": """
actor, critic = nn.Linear(4, 2), nn.Linear(4, 1)
opt_a = torch.optim.Adam(actor.parameters(), lr=1e-2)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-2)
for _ in range(4):
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
""",
    "actor_critic_step_function_one_optimizer": """
policy = nn.Linear(4, 3)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)

def finish_episode(states, actions, returns):
    losses = []
    for s, a, r in zip(states, actions, returns):
        log_prob = F.log_softmax(policy(s), -1)[a]
        losses.append(-log_prob * r)
    optimizer.zero_grad()
    loss = torch.stack(losses).sum()
    loss.backward()
    optimizer.step()

for _ in range(4):
    finish_episode(torch.randn(5, 4), [0, 1, 2, 1, 0], torch.randn(5))
""",
}


def _traced(tmp_path, name: str, body: str, static: bool):
    import runpy

    import gradtrace

    src = (HEAD + body).lstrip("\n")
    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace(static=static)
    with tr:
        runpy.run_path(str(path))
    line = next((i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C")), 0)
    return tr.findings, line


@pytest.mark.parametrize("name", sorted(BUGS))
def test_early_step_named_on_its_own_optimizer(tmp_path, name):
    """The runtime's own diagnosis (static checks off)."""
    code, body = BUGS[name]
    found, line = _traced(tmp_path, name, body, static=False)
    assert found and (found[0].code, found[0].line) == (code, line), found


@pytest.mark.parametrize("name", ["gan_generator_step_before_its_backward",
                                  "gan_trainer_method_generator_step_early"])
def test_fused_on_the_same_optimizer_line(tmp_path, name):
    """Both faces on: the finding that leads names the generator's step, and no finding names
    the discriminator's step (the static GT522 is on the same line, not another optimizer's)."""
    _, body = BUGS[name]
    found, line = _traced(tmp_path, name, body, static=True)
    assert found[0].line == line, found
    assert [f.line for f in found] == [line], found


@pytest.mark.parametrize("name", sorted(ACCUMULATE))
def test_generator_left_uncleared_seen(tmp_path, name):
    found, line = _traced(tmp_path, name, ACCUMULATE[name], static=False)
    assert found and (found[0].code, found[0].line) == ("GT501", line), found


# the generator's model cut off from every loss (a fake detached once and reused for its loss):
# the cut leads, not "the optimizer holds parameters the loss before its step does not reach"
CUT = {
    "gan_fake_detached_once_script": """
netG, netD = nn.Linear(4, 6), nn.Linear(6, 1)
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-2)
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-2)
for _ in range(4):
    netD.zero_grad()
    errD_real = F.softplus(-netD(torch.randn(5, 6))).mean()
    errD_real.backward()
    fake = netG(torch.randn(5, 4)).detach()  # C
    errD_fake = F.softplus(netD(fake)).mean()
    errD_fake.backward()
    optimizerD.step()
    netG.zero_grad()
    errG = F.softplus(-netD(fake)).mean()
    errG.backward()
    optimizerG.step()
""",
    "gan_trainer_samples_under_no_grad": """
class Trainer:
    def __init__(self):
        self.gen = nn.Sequential(nn.Linear(4, 6), nn.Tanh())
        self.disc = nn.Linear(6, 1)
        self.opt_g = torch.optim.SGD(self.gen.parameters(), lr=0.1)
        self.opt_d = torch.optim.SGD(self.disc.parameters(), lr=0.1)

    def fit(self, steps):
        for _ in range(steps):
            with torch.no_grad():  # C
                fake = self.gen(torch.randn(5, 4))
            self.opt_d.zero_grad()
            (self.disc(fake).mean() - self.disc(torch.randn(5, 6)).mean()).backward()
            self.opt_d.step()
            self.opt_g.zero_grad()
            (-self.disc(fake).mean()).backward()
            self.opt_g.step()

Trainer().fit(4)
""",
}


@pytest.mark.parametrize("name", sorted(CUT))
def test_generator_cut_off_named_at_the_cut(tmp_path, name):
    found, line = _traced(tmp_path, name, CUT[name], static=False)
    assert found and found[0].line == line and found[0].code != "GT406", found


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_correct_loop_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
