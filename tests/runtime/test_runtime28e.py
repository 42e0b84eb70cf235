"""Session-28 run-time diagnoses of silent bugs, second wave (docs/triage/runtime28e.md):

- a step that applies, besides its own loss's gradient, a backward() another optimizer already
  applied (NOTE [another optimizer's gradient applied again]): the zero_grad() that clears
  before the other loss instead of after it, or the forward where the model runs in the other
  loss with its parameters requiring grad.

Buggy twins (code + line asserted), silent look-alikes, and a variant the cases do not show.
"""
from __future__ import annotations

from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn

torch.manual_seed(0)
"""


def _leaks(res):
    return [f for f in res.findings if f["source"] != "static"
            and "already applied" in f["message"]]


def _check(run_script, src):
    res = run_script(src)
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    assert (found[0]["code"], found[0]["line"]) == ("GT501", marked_line(src)), res.err
    assert _leaks(res), res.err


GAN = HEAD + """
gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
critic = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
g_opt = torch.optim.Adam(gen.parameters(), lr=1e-3)
d_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
for it in range(6):
    real = torch.randn(16, 8)
{body}
"""

# twin: each optimizer clears after its own step, so the generator's loss (through the critic)
# is still in the critic's gradients at the critic's step
GAN_ZERO_AFTER = GAN.format(body="""\
    g_loss = -critic(gen(torch.randn(16, 4))).mean()
    g_loss.backward()
    g_opt.step()
    g_opt.zero_grad()
    d_loss = critic(gen(torch.randn(16, 4)).detach()).mean() - critic(real).mean()
    d_loss.backward()
    d_opt.step()
    d_opt.zero_grad()  # <- cause""")

# variant: both cleared at the top of the pass, before the generator's loss
GAN_ZERO_TOP = GAN.format(body="""\
    g_opt.zero_grad()
    d_opt.zero_grad()  # <- cause
    g_loss = -critic(gen(torch.randn(16, 4))).mean()
    g_loss.backward()
    g_opt.step()
    d_loss = critic(gen(torch.randn(16, 4)).detach()).mean() - critic(real).mean()
    d_loss.backward()
    d_opt.step()""")

# look-alike: the critic is cleared right before its own backward()
GAN_OK = GAN.format(body="""\
    g_opt.zero_grad()
    g_loss = -critic(gen(torch.randn(16, 4))).mean()
    g_loss.backward()
    g_opt.step()
    d_opt.zero_grad()
    d_loss = critic(gen(torch.randn(16, 4)).detach()).mean() - critic(real).mean()
    d_loss.backward()
    d_opt.step()""")


def test_critic_cleared_after_its_step_keeps_the_generator_loss(run_script):
    _check(run_script, GAN_ZERO_AFTER)


def test_critic_cleared_before_the_generator_loss_variant(run_script):
    _check(run_script, GAN_ZERO_TOP)


def test_critic_cleared_before_its_own_backward_is_silent(run_script):
    res = run_script(GAN_OK)
    assert res.code == 0, res.err
    assert _leaks(res) == [], res.err


ACTOR_CRITIC = HEAD + """
class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2), nn.Tanh())
        self.critic = nn.Sequential(nn.Linear(7, 16), nn.ReLU(), nn.Linear(16, 1))

    def q(self, s, a):
        return self.critic(torch.cat([s, a], 1))

    def policy_loss(self, s):
{policy}


model = ActorCritic()
pi_opt = torch.optim.Adam(model.actor.parameters(), lr=1e-3)
q_opt = torch.optim.Adam(model.critic.parameters(), lr=1e-3)
for it in range(6):
    s, a, target = torch.randn(32, 5), torch.rand(32, 2) * 2 - 1, torch.randn(32, 1)
    q_opt.zero_grad()
    q_loss = (model.q(s, a) - target).pow(2).mean()
    q_loss.backward()
    pi_opt.zero_grad()
    model.policy_loss(s).backward()
    pi_opt.step()
    q_opt.step()
"""

# twin: the policy's loss runs the critic with its parameters requiring grad, between the
# critic's backward() and its step: the critic's step follows both losses
AC_LEAK = ACTOR_CRITIC.format(policy="""\
        return -self.critic(torch.cat([s, self.actor(s)], 1)).mean()  # <- cause""")

# look-alike: the critic is frozen for the policy's loss (the REDQ fix)
AC_FROZEN = ACTOR_CRITIC.format(policy="""\
        self.critic.requires_grad_(False)
        loss = -self.critic(torch.cat([s, self.actor(s)], 1)).mean()
        self.critic.requires_grad_(True)
        return loss""")


def test_policy_loss_through_the_critic_before_its_step(run_script):
    _check(run_script, AC_LEAK)


def test_policy_loss_through_a_frozen_critic_is_silent(run_script):
    res = run_script(AC_FROZEN)
    assert res.code == 0, res.err
    assert _leaks(res) == [], res.err


# look-alike: two losses over an encoder and a head, two optimizers that both step after both
# backward() calls (one joint update): nothing is applied twice
JOINT = HEAD + """
enc, head = nn.Linear(6, 8), nn.Linear(8, 1)
enc_opt = torch.optim.SGD(enc.parameters(), lr=0.01)
head_opt = torch.optim.SGD(head.parameters(), lr=0.01)
for it in range(6):
    x, y = torch.randn(16, 6), torch.randn(16, 1)
    enc_opt.zero_grad()
    head_opt.zero_grad()
    (head(enc(x)) - y).pow(2).mean().backward()
    (0.1 * head(enc(x)).abs().mean()).backward()
    enc_opt.step()
    head_opt.step()
"""


def test_two_losses_both_optimizers_step_after_both_is_silent(run_script):
    res = run_script(JOINT)
    assert res.code == 0, res.err
    assert _leaks(res) == [], res.err


# look-alike: every gradient is zeroed through `.data` after each step (no version bump): the
# next loss's backward() starts from zeros, nothing of the other loss is left (InfoGAN's
# reset_grad), with a third optimizer that shares the generator's parameters
DATA_RESET = HEAD + """
gen, disc, q = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 3)
params = list(gen.parameters()) + list(disc.parameters()) + list(q.parameters())
g_opt = torch.optim.Adam(gen.parameters(), lr=1e-3)
d_opt = torch.optim.Adam(disc.parameters(), lr=1e-3)
q_opt = torch.optim.Adam(list(gen.parameters()) + list(q.parameters()), lr=1e-3)


def reset_grad():
    for p in params:
        if p.grad is not None:
            p.grad.data.zero_()


for it in range(5):
    x, z = torch.randn(16, 8), torch.randn(16, 4)
    d_loss = -(torch.sigmoid(disc(x)).log() + (1 - torch.sigmoid(disc(gen(z)))).log()).mean()
    d_loss.backward()
    d_opt.step()
    reset_grad()
    g_loss = -torch.sigmoid(disc(gen(z))).log().mean()
    g_loss.backward()
    g_opt.step()
    reset_grad()
    q_loss = q(gen(z)).logsumexp(1).mean()
    q_loss.backward()
    q_opt.step()
    reset_grad()
"""


def test_gradients_zeroed_through_data_after_each_step_is_silent(run_script):
    res = run_script(DATA_RESET)
    assert res.code == 0, res.err
    assert _leaks(res) == [], res.err
