"""The lead's rules of session 22, from the misses of `benchmarks/injected_blind.py` (pytorch/examples
mutated blind by someone who never read the rules).

GT720: a `sample()` draw fed to a network or used as a relaxed draw, where the loss needs the
gradient through the sample (the VAE mutation). Each twin is run on real torch: the parameters
upstream of the draw get no gradient from the term that uses it (``holds``); each look-alike is
silent and trains them.

GT767: an advantage made from the critic's values without a detach weighs the policy term (the
actor-critic mutation, and the encode-attend-navigate case). Each twin is run next to its
detached form: the critic's gradient differs (``holds``).

GT721: an LBFGS closure that backpropagates without clearing the gradients (the
time-sequence-prediction mutation). Each twin fits a least-squares problem next to its fixed
form: the final loss is far higher (``holds``).

GT230: a value of a forward under `no_grad` kept in a list attribute that another function
backpropagates without running a model (the REINFORCE mutation). Each twin raises on real torch.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

NETS = """
from torch.distributions import Normal, RelaxedOneHotCategorical, Independent
enc, dec = nn.Linear(6, 4), nn.Linear(2, 6)
actor, critic = nn.Linear(3, 4), nn.Linear(5, 1)
x, s = torch.randn(8, 6), torch.randn(8, 3)
"""

LOOK_ALIKES = [
    # SAC's actor loss with the reparameterised draw
    Shape(NETS + """
def actor_loss(s, alpha=0.2):
    mu, log_std = actor(s).chunk(2, -1)
    d = Normal(mu, log_std.exp())
    a = d.rsample()
    q = critic(torch.cat([s, a], -1))
    return (alpha * d.log_prob(a).sum(-1) - q.squeeze(-1)).mean()
actor_loss(s).backward()
""", "GT720", holds="actor.weight.grad[:2].abs().sum() > 0"),
    # REINFORCE: the action goes to the environment and log_prob; sample() is right
    Shape(NETS + """
def env_step(a):
    return -(a ** 2).sum(-1)
def policy_loss(s):
    mu, log_std = actor(s).chunk(2, -1)
    d = Normal(mu, log_std.exp())
    a = d.sample()
    r = env_step(a)
    return -(d.log_prob(a).sum(-1) * r).mean()
policy_loss(s).backward()
""", "GT720", holds="actor.weight.grad.abs().sum() > 0"),
    # the critic's target under no_grad, and a prior draw decoded for generation
    Shape(NETS + """
def target(s2):
    with torch.no_grad():
        mu, log_std = actor(s2).chunk(2, -1)
        a2 = Normal(mu, log_std.exp()).sample()
        return critic(torch.cat([s2, a2], -1))
def generate(n):
    z = Normal(torch.zeros(n, 2), torch.ones(n, 2)).sample()
    return dec(z)
loss = (critic(torch.cat([s, s[:, :2]], -1)) - target(s)).pow(2).mean() + generate(4).sum() * 0
loss.backward()
""", "GT720", holds="critic.weight.grad is not None"),
    # a VAE's helper returning the reparameterised draw
    Shape(NETS + """
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.dec = enc, dec
    def reparameterize(self, mu, logvar):
        return Normal(mu, (0.5 * logvar).exp()).rsample()
    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, -1)
        z = self.reparameterize(mu, logvar)
        return self.dec(z)
VAE()(x).pow(2).mean().backward()
""", "GT720", holds="enc.weight.grad.abs().sum() > 0"),
]

TWINS = [
    # a VAE's helper returning sample(): the decoder's term never reaches the encoder
    Shape(NETS + """
class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.dec = enc, dec
    def reparameterize(self, mu, logvar):
        return Normal(mu, (0.5 * logvar).exp()).sample()
    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, -1)
        z = self.reparameterize(mu, logvar)
        return self.dec(z)
VAE()(x).pow(2).mean().backward()
""", "GT720", 11, holds="enc.weight.grad is None"),
    # SAC's actor scored by the critic on a sample(): only the entropy term trains the mean
    Shape(NETS + """
mu, log_std = actor(s).chunk(2, -1)
d = Independent(Normal(mu, log_std.exp()), 1)
a = d.sample()
q = critic(torch.cat([s, a], -1))
loss = (0.0 * d.log_prob(a) - q.squeeze(-1)).mean()
loss.backward()
""", "GT720", 8, holds="actor.weight.grad.abs().sum() == 0"),
    # a relaxed one-hot draw weighting values: the selection logits get no gradient
    Shape(NETS + """
def soft_select(logits, values, tau=0.5):
    w = RelaxedOneHotCategorical(tau, logits=logits).sample()
    return (w * values).sum(-1)
out = soft_select(enc(x), torch.randn(8, 4, requires_grad=True))
out.sum().backward()
""", "GT720", 7, holds="enc.weight.grad is None"),
]


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_look_alike_is_silent_and_trains(i: int) -> None:
    assert _found(LOOK_ALIKES[i]) == []
    _run(LOOK_ALIKES[i])


@pytest.mark.parametrize("i", range(len(TWINS)))
def test_twin_is_reported_and_loses_the_gradient(i: int) -> None:
    bad = TWINS[i]
    assert _found(bad) == [(bad.line, bad.code)], bad.src
    _run(bad)


AC = """
import torch.nn.functional as F
actor, critic = nn.Linear(3, 4), nn.Linear(3, 1)
s, returns = torch.randn(8, 3), torch.randn(8)
def grads(detach):
    actor.zero_grad(); critic.zero_grad()
    log_probs = actor(s).log_softmax(-1)[:, 0]
    values = critic(s).squeeze(-1)
    adv = returns - (values.detach() if detach else values)
    ((-(log_probs * adv)).mean() + F.mse_loss(values, returns)).backward()
    return critic.weight.grad.clone()
"""

CRITIC_LOOK_ALIKES = [
    # the fix: the baseline detached (or read as a number), and a TD error squared with weights
    Shape(AC + """
def update(actor, critic, states, returns, weights):
    log_probs = actor(states).log_softmax(-1)[:, 0]
    values = critic(states).squeeze(-1)
    advantage = returns - values.detach()
    td = returns - values
    policy_loss = -(log_probs * advantage).mean()
    value_loss = F.mse_loss(values, returns) + (td * weights).pow(2).mean()
    (policy_loss + value_loss).backward()
update(actor, critic, s, returns, torch.rand(8))
""", "GT767", holds="critic.weight.grad is not None"),
    # the advantage computed under no_grad (GAE), and one per step as a number
    Shape(AC + """
def update(actor, critic, states, returns):
    values = critic(states).squeeze(-1)
    with torch.no_grad():
        advantage = returns - values
    log_probs = actor(states).log_softmax(-1)[:, 0]
    loss = -(log_probs * advantage).mean() + F.smooth_l1_loss(values, returns)
    loss.backward()
    for (lp, v), R in zip(zip(log_probs, values), returns.tolist()):
        adv = R - v.item()
        _ = -lp * adv
update(actor, critic, s, returns)
""", "GT767", holds="not torch.equal(grads(True), grads(False))"),
]

CRITIC_TWINS = [
    # a function taking the networks as arguments
    Shape(AC + """
def update(actor, critic, states, returns):
    log_probs = actor(states).log_softmax(-1)[:, 0]
    values = critic(states).squeeze(-1)
    advantage = returns - values
    policy_loss = -(log_probs * advantage).mean()
    value_loss = F.mse_loss(values, returns)
    (policy_loss + value_loss).backward()
update(actor, critic, s, returns)
""", "GT767", 15, holds="not torch.equal(grads(True), grads(False))"),
    # pytorch/examples' actor-critic: saved (log_prob, value) pairs, one advantage per step
    Shape(AC + """
saved = [(actor(x).log_softmax(-1)[0], critic(x)[0]) for x in s.unsqueeze(1)]
policy_losses, value_losses = [], []
for (log_prob, value), R in zip(saved, returns.tolist()):
    advantage = R - value
    policy_losses.append(-log_prob * advantage)
    value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
loss.backward()
""", "GT767", 15, holds="not torch.equal(grads(True), grads(False))"),
    # a trainer's method, the loss written out as a squared difference
    Shape(AC + """
class Trainer:
    def __init__(self):
        self.actor, self.critic = actor, critic
    def step(self, states, returns):
        values = self.critic(states).squeeze(-1)
        logp = self.actor(states).log_softmax(-1)[:, 0]
        adv = returns - values
        loss = -(logp * adv).mean() + ((values - returns) ** 2).mean()
        loss.backward()
Trainer().step(s, returns)
""", "GT767", 18, holds="not torch.equal(grads(True), grads(False))"),
]


@pytest.mark.parametrize("i", range(len(CRITIC_LOOK_ALIKES)))
def test_critic_look_alike_is_silent(i: int) -> None:
    assert _found(CRITIC_LOOK_ALIKES[i]) == []
    _run(CRITIC_LOOK_ALIKES[i])


@pytest.mark.parametrize("i", range(len(CRITIC_TWINS)))
def test_critic_twin_is_reported_and_trains_the_critic_by_the_policy(i: int) -> None:
    bad = CRITIC_TWINS[i]
    assert _found(bad) == [(bad.line, bad.code)], bad.src
    _run(bad)


POLICY = """
from torch.distributions import Categorical
policy = nn.Sequential(nn.Linear(4, 2), nn.Softmax(-1))
critic = nn.Linear(4, 1)
"""

KEPT_LOOK_ALIKES = [
    # the example as written: the action's forward with grad
    Shape(POLICY + """
policy.saved_log_probs = []
def select_action(state):
    m = Categorical(policy(state))
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()
def finish_episode(returns):
    loss = torch.stack([-lp * r for lp, r in zip(policy.saved_log_probs, returns)]).sum()
    loss.backward()
    del policy.saved_log_probs[:]
for _ in range(3):
    select_action(torch.randn(4))
finish_episode([1.0, 0.5, 0.2])
""", "GT230", holds="policy[0].weight.grad is not None"),
    # values kept under no_grad for logging; the update recomputes them (PPO's evaluate)
    Shape(POLICY + """
class Agent:
    def __init__(self):
        self.states, self.values = [], []
    def act(self, state):
        with torch.no_grad():
            v = critic(state)
        self.states.append(state)
        self.values.append(v)
    def update(self, returns):
        old = torch.stack(self.values).squeeze(-1)
        new = critic(torch.stack(self.states)).squeeze(-1)
        ((new - returns) ** 2 + 0 * old).mean().backward()
a = Agent()
for _ in range(3):
    a.act(torch.randn(4))
a.update(torch.randn(3))
""", "GT230", holds="critic.weight.grad is not None"),
]

KEPT_TWINS = [
    # REINFORCE with the action selected under no_grad
    Shape(POLICY + """
policy.saved_log_probs = []
def select_action(state):
    with torch.no_grad():
        probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()
def finish_episode(returns):
    loss = torch.stack([-lp * r for lp, r in zip(policy.saved_log_probs, returns)]).sum()
    loss.backward()
for _ in range(3):
    select_action(torch.randn(4))
finish_episode([1.0, 0.5, 0.2])
""", "GT230", 7, "does not require grad"),
    # a trainer keeping the critic's values from a no-grad rollout, fitted in update()
    Shape(POLICY + """
class Agent:
    def __init__(self):
        self.values = []
    @torch.no_grad()
    def act(self, state):
        v = critic(state)
        self.values.append(v)
    def update(self, returns):
        values = torch.stack(self.values).squeeze(-1)
        ((values - returns) ** 2).mean().backward()
a = Agent()
for _ in range(3):
    a.act(torch.randn(4))
a.update(torch.randn(3))
""", "GT230", 8, "does not require grad"),
    # saved (log_prob, value) pairs of an actor-critic, the step under no_grad
    Shape(POLICY + """
from collections import namedtuple
Saved = namedtuple("Saved", "log_prob value")
critic.saved = []
def step(state):
    with torch.no_grad():
        probs, value = policy(state), critic(state)
    m = Categorical(probs)
    a = m.sample()
    critic.saved.append(Saved(m.log_prob(a), value))
def finish(returns):
    losses = [-s.log_prob * (r - s.value.item()) + (s.value - r).pow(2).sum()
              for s, r in zip(critic.saved, returns)]
    torch.stack(losses).sum().backward()
for _ in range(3):
    step(torch.randn(4))
finish([1.0, 0.5, 0.2])
""", "GT230", 9, "does not require grad"),
]


@pytest.mark.parametrize("i", range(len(KEPT_LOOK_ALIKES)))
def test_kept_look_alike_is_silent(i: int) -> None:
    assert _found(KEPT_LOOK_ALIKES[i]) == []
    _run(KEPT_LOOK_ALIKES[i])


@pytest.mark.parametrize("i", range(len(KEPT_TWINS)))
def test_kept_twin_is_reported_and_raises(i: int) -> None:
    bad = KEPT_TWINS[i]
    assert _found(bad) == [(bad.line, bad.code)], bad.src
    _run(bad)


FIT = """
w = nn.Parameter(torch.zeros(3))
x = torch.randn(10, 3)
y = x @ torch.tensor([1.0, 2.0, 3.0])
def mse():
    return ((x @ w - y) ** 2).mean()
"""

LBFGS_LOOK_ALIKES = [
    Shape(FIT + """
opt = torch.optim.LBFGS([w], lr=0.5)
for i in range(5):
    def closure():
        opt.zero_grad()
        loss = mse()
        loss.backward()
        return loss
    opt.step(closure)
""", "GT721", holds="mse().item() < 1e-4"),
    Shape(FIT + """
class Fitter:
    def __init__(self):
        self.opt = torch.optim.LBFGS([w], lr=0.5)
        self.sgd = torch.optim.SGD([w], lr=0.01)
    def fit(self):
        for i in range(5):
            def closure():
                w.grad = None
                loss = mse()
                loss.backward()
                return loss
            self.opt.step(closure)
        self.sgd.zero_grad()
        def once():
            loss = mse()
            loss.backward()
            return loss
        self.sgd.step(once)
Fitter().fit()
""", "GT721", holds="mse().item() < 1e-3"),
]

LBFGS_TWINS = [
    Shape(FIT + """
opt = torch.optim.LBFGS([w], lr=0.5)
for i in range(5):
    opt.zero_grad()
    def closure():
        loss = mse()
        loss.backward()
        return loss
    opt.step(closure)
""", "GT721", 12, holds="mse().item() > 1.0"),
    Shape(FIT + """
class Fitter:
    def __init__(self):
        self.opt = torch.optim.LBFGS([w], lr=0.5, max_iter=10)
    def fit(self):
        for i in range(5):
            self.opt.zero_grad()
            def closure():
                loss = mse()
                loss.backward()
                return loss
            self.opt.step(closure)
Fitter().fit()
""", "GT721", 15, holds="mse().item() > 1.0"),
]


@pytest.mark.parametrize("i", range(len(LBFGS_LOOK_ALIKES)))
def test_lbfgs_look_alike_is_silent_and_fits(i: int) -> None:
    assert _found(LBFGS_LOOK_ALIKES[i]) == []
    _run(LBFGS_LOOK_ALIKES[i])


@pytest.mark.parametrize("i", range(len(LBFGS_TWINS)))
def test_lbfgs_twin_is_reported_and_diverges(i: int) -> None:
    bad = LBFGS_TWINS[i]
    assert _found(bad) == [(bad.line, bad.code)], bad.src
    _run(bad)
