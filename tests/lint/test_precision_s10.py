"""Shapes that fired wrongly on the projects of docs/triage/unseen10.md (session 10: CQL,
pytorch-deeplab-xception, fast_adversarial, pypots, pytorch_toolbelt, torch-uncertainty), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""
INPLACE = (RuntimeError, "modified by an inplace operation")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # deeplab-xception's DRN: `x = self.relu(x)` then `x = self.layer0(x)`, a Sequential(conv, bn,
    # ReLU(inplace=True)): its in-place ReLU overwrites the conv's output, not its input; here a
    # Linear then LeakyReLU(0.1, True) after a sigmoid. Twin: the Sequential *starts* in place
    "sequential-ending-in-an-inplace-activation": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.1, True))
                self.head = nn.Linear(4, 1)
                self.inp = nn.Linear(4, 4)
            def forward(self, x):
                h = torch.sigmoid(self.inp(x))
                h = self.proj(h)
                return self.head(h)
        net = Net()
        net(torch.randn(3, 4)).sum().backward()
        """, "GT602"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Sequential(nn.LeakyReLU(0.1, True), nn.Linear(4, 4))
                self.head = nn.Linear(4, 1)
                self.inp = nn.Linear(4, 4)
            def forward(self, x):
                h = torch.sigmoid(self.inp(x))
                h = self.proj(h)
                return self.head(h)
        net = Net()
        net(torch.randn(3, 4)).sum().backward()
        """, "GT602", 4, raises=INPLACE)),  # at the in-place layer opening the Sequential (ho54)
    # pytorch_toolbelt's CoordConv: `sqrt(pow(xx.type_as(t) - .5, 2) + ...)` of an arange grid: the
    # cast keeps nothing of `t`, so no gradient reaches the sqrt; here a linspace grid `.to(x)`.
    # Twin: the centre is a Parameter, and the grid point on it gets a NaN gradient
    "sqrt-of-a-constant-grid-cast-like-the-input": (Shape("""
        def radial_map(x):
            h, w = x.shape[-2:]
            gy, gx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w),
                                    indexing="ij")
            r = torch.sqrt((gx.to(x) - 0.0) ** 2 + (gy.to(x) - 0.0) ** 2)
            return r.expand(x.shape[0], 1, h, w)
        class RadialConv(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 2, 1)
            def forward(self, x):
                return self.conv(torch.cat([x, radial_map(x)], 1))
        net = RadialConv()
        net(torch.randn(2, 3, 5, 5)).sum().backward()
        """, "GT753"), Shape("""
        def radial_map(x, centre):
            h, w = x.shape[-2:]
            gy, gx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w),
                                    indexing="ij")
            r = torch.sqrt((gx.to(x) - centre[1]) ** 2 + (gy.to(x) - centre[0]) ** 2)
            return r.expand(x.shape[0], 1, h, w)
        class RadialConv(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(4, 2, 1)
                self.centre = nn.Parameter(torch.zeros(2))
            def forward(self, x):
                return self.conv(torch.cat([x, radial_map(x, self.centre)], 1))
        net = RadialConv()
        net(torch.randn(2, 3, 5, 5)).sum().backward()
        """, "GT753", 5, holds="torch.isnan(net.centre.grad).any()")),
    # fast_adversarial's MNIST PGD training: the attack loop clears and backpropagates every pass,
    # then `opt.zero_grad(); loss.backward(); opt.step()` after it; here a while loop.
    # Twin: the step after a per-batch clear/backward loop applies only the last batch
    "attack-loop-then-own-clear-backward-and-step": (Shape("""
        def train_epoch(net, opt, batches, eps=0.1):
            for xb, yb in batches:
                delta = torch.zeros_like(xb, requires_grad=True)
                k = 0
                while k < 3:
                    opt.zero_grad()
                    F.mse_loss(net(xb + delta), yb).backward()
                    delta = (delta + eps * delta.grad.sign()).detach().requires_grad_()
                    k += 1
                opt.zero_grad()
                F.mse_loss(net(xb + delta.detach()), yb).backward()
                opt.step()
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        before = net.weight.detach().clone()
        train_epoch(net, opt, [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
        """, "GT518", holds="not torch.equal(before, net.weight)"), Shape("""
        def fit(net, opt, batches, epochs):
            for _ in range(epochs):
                for xb, yb in batches:
                    net.zero_grad()
                    F.mse_loss(net(xb), yb).backward()
                opt.step()
        net = nn.Linear(3, 1)
        ref = copy.deepcopy(net)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
        fit(net, opt, batches, 1)
        F.mse_loss(ref(batches[-1][0]), batches[-1][1]).backward()
        """, "GT518", 6, holds="torch.allclose(net.weight.grad, ref.weight.grad)")),
    # pypots TS2Vec: representations collected from a model method that runs under no_grad (another
    # file), then `torch.cat(...).cpu().numpy()`, which would raise on a tensor requiring grad;
    # here torch.stack. Twin: the author detaches before `.numpy()`: the graphs were kept
    "collected-then-read-as-numpy": (Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            def forward(self, x):
                return self.body(x)
            @torch.no_grad()
            def embed(self, x):
                return self.body(x)
        def embed_dataset(encoder, loader):
            feats = []
            for xb in loader:
                feats.append(encoder.embed(xb))
            return torch.stack(feats).cpu().numpy()
        enc = Encoder()
        arr = embed_dataset(enc, [torch.randn(3, 4) for _ in range(4)])
        """, "GT505"), Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
            def forward(self, x):
                return self.body(x)
            def embed(self, x):
                return self.body(x)
        def embed_dataset(encoder, loader):
            feats = []
            for xb in loader:
                feats.append(encoder.embed(xb))
            return torch.stack(feats).detach().cpu().numpy(), feats
        enc = Encoder()
        arr, kept = embed_dataset(enc, [torch.randn(3, 4) for _ in range(4)])
        """, "GT505", 12, holds="kept[0].grad_fn is not None")),
    # CQL: `alpha_prime_optimizer = optimizer_class([self.log_alpha_prime])` stepped between
    # backwards; the later loss reads the multiplier only as `.detach()` (here a global Adam over a
    # list). Twin: a critic stepped before the actor loss that runs through it
    "multiplier-stepped-between-backwards": (Shape("""
        actor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
        critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
        log_beta = torch.zeros(1, requires_grad=True)
        beta_opt = torch.optim.Adam([log_beta], lr=1e-3)
        actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
        def update(batch):
            obs = batch["obs"]
            pi = actor(obs)
            actor_loss = pi.pow(2).mean() + log_beta.detach().exp() * pi.abs().mean()
            beta = log_beta.exp()
            beta_loss = -(beta * (critic(obs).detach().mean() - 1.0))
            beta_opt.zero_grad()
            beta_loss.backward(retain_graph=True)
            beta_opt.step()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
        for _ in range(2):
            update({"obs": torch.randn(4, 3)})
        """, "GT601", holds="actor[0].weight.grad is not None"), Shape("""
        class ActorCritic:
            def __init__(self, actor, critic, opt_cls=torch.optim.SGD):
                self.actor, self.critic = actor, critic
                self.critic_opt = opt_cls(self.critic.parameters(), lr=0.1)
                self.actor_opt = opt_cls(self.actor.parameters(), lr=0.1)
            def update(self, batch):
                obs, act = batch["obs"], batch["act"]
                q_loss = (self.critic(torch.cat([obs, act], 1)) - 1).pow(2).mean()
                pi_loss = -self.critic(torch.cat([obs, self.actor(obs)], 1)).mean()
                self.critic_opt.zero_grad()
                q_loss.backward(retain_graph=True)
                self.critic_opt.step()
                self.actor_opt.zero_grad()
                pi_loss.backward()
                self.actor_opt.step()
        agent = ActorCritic(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)),
                            nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)))
        agent.update({"obs": torch.randn(4, 3), "act": torch.randn(4, 2)})
        """, "GT601", 12, raises=INPLACE)),
    # CQL: `qf1_optimizer = optimizer_class(self.qf1.parameters())` (a class given as a default);
    # the qf2 loss, from `batch['observations']` and qf2 only, never holds qf1's weights.
    # Twin: the actor loss does run through the stepped critic (raises)
    "second-critic-loss-from-a-batch-dict": (Shape("""
        class TwinCritic:
            def __init__(self, q1, q2, opt_cls=torch.optim.SGD):
                self.q1, self.q2 = q1, q2
                self.q1_opt = opt_cls(self.q1.parameters(), lr=0.1)
                self.q2_opt = opt_cls(self.q2.parameters(), lr=0.1)
            def update(self, batch):
                sa, target = batch["sa"], batch["target"]
                q1_loss = (self.q1(sa) - target).pow(2).mean()
                q2_loss = (self.q2(sa) - target).pow(2).mean()
                self.q1_opt.zero_grad()
                q1_loss.backward(retain_graph=True)
                self.q1_opt.step()
                self.q2_opt.zero_grad()
                q2_loss.backward()
                self.q2_opt.step()
        mk = lambda: nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
        agent = TwinCritic(mk(), mk())
        for _ in range(2):
            agent.update({"sa": torch.randn(4, 5), "target": torch.randn(4, 1)})
        """, "GT601", holds="agent.q2[0].weight.grad is not None"), Shape("""
        class ActorCritic:
            def __init__(self, actor, critic, opt_cls=torch.optim.SGD):
                self.actor, self.critic = actor, critic
                self.critic_opt = opt_cls(self.critic.parameters(), lr=0.1)
                self.actor_opt = opt_cls(self.actor.parameters(), lr=0.1)
            def update(self, batch):
                obs, act = batch["obs"], batch["act"]
                q_loss = (self.critic(torch.cat([obs, act], 1)) - 1).pow(2).mean()
                pi_loss = -self.critic(torch.cat([obs, self.actor(obs)], 1)).mean()
                self.critic_opt.zero_grad()
                q_loss.backward(retain_graph=True)
                self.critic_opt.step()
                self.actor_opt.zero_grad()
                pi_loss.backward()
                self.actor_opt.step()
        agent = ActorCritic(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)),
                            nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)))
        agent.update({"obs": torch.randn(4, 3), "act": torch.randn(4, 2)})
        """, "GT601", 12, raises=INPLACE)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


POSTERIOR = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Posterior(nn.Module):
    def __init__(self, mu, rho):
        super().__init__()
        self.mu, self.rho = mu, rho

    def rsample(self):
        return self.mu + F.softplus(self.rho) * torch.randn_like(self.mu)
"""
LAYER = """
import torch
import torch.nn as nn
import torch.nn.functional as F
{imports}


class BayesLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.w_mu = nn.Parameter(torch.randn(n_out, n_in) * 0.1)
        self.w_rho = nn.Parameter(torch.full((n_out, n_in), -3.0))
        self.w_post = {made}

    def forward(self, x):
        return F.linear(x, self.w_post.rsample())
"""
TRAIN = """
import torch
from bayes.layer import BayesLinear
net = BayesLinear(3, 1)
opt = torch.optim.SGD(net.parameters(), 0.1)
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(4, 3)).pow(2).mean().backward()
    opt.step()
"""


@pytest.mark.parametrize("imports,made,line", [
    # torch-uncertainty's Bayesian layers: `TrainableDistribution(self.weight_mu, ...)` imported
    # from `.sampler`, a module of the package that stores the Parameters and samples in forward
    ("from . import posterior", "posterior.Posterior(self.w_mu, self.w_rho)", None),
    ("from .posterior import Posterior as Post", "Post(self.w_mu, self.w_rho)", None),
    # twin: a torch distribution made in __init__ from `softplus(self.w_rho)`: one graph, freed
    # by the first backward
    ("", "torch.distributions.Normal(self.w_mu, F.softplus(self.w_rho))", 13),
])
def test_class_of_another_file_of_the_package_keeps_its_parameters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, imports: str, made: str,
        line: int | None) -> None:
    pkg = tmp_path / "bayes"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "posterior.py").write_text(POSTERIOR)
    layer = LAYER.format(imports=imports, made=made)
    (pkg / "layer.py").write_text(layer)
    found = check_source(layer, "bayes/layer.py", select=["GT521"])
    assert [(f.line, f.code) for f in found] == ([] if line is None else [(line, "GT521")])
    monkeypatch.syspath_prepend(str(tmp_path))  # the package, imported for real, then dropped
    try:
        if line is None:
            exec(compile(TRAIN, str(tmp_path / "train.py"), "exec"), {})
        else:
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                exec(compile(TRAIN, str(tmp_path / "train.py"), "exec"), {})
    finally:
        for name in [m for m in sys.modules if m == "bayes" or m.startswith("bayes.")]:
            del sys.modules[name]
