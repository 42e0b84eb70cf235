"""The static facts built for held-out batch 46 (docs/triage/ho52.md).

Each pair is a correct shape the checker must leave alone and a buggy twin it must report on
its line, written in other names and shapes than the real-world cases; every snippet runs on
real torch and the test checks what the finding claims."""
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

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT307: `t.detach().requires_grad_()` (or `t.data.clone()...`) is a new leaf whatever `t`
    # was; a view of it bound to the same name is not, and its `.grad` stays None.
    "detached-leaf-viewed-after": (Shape("""
        net = nn.Linear(12, 2)
        def saliency(img):
            img = img.reshape(1, -1).detach().requires_grad_()
            net(img).max().backward()
            return img.grad.abs()
        sal = saliency(torch.rand(3, 4))
        """, "GT307", holds="sal.shape == (1, 12)"), Shape("""
        net = nn.Linear(12, 2)
        def saliency(img):
            img = img.data.clone().requires_grad_()
            img = img.reshape(1, -1)
            net(img).max().backward()
            return img.grad
        sal = saliency(torch.rand(3, 4))
        """, "GT307", line=4, holds="sal is None")),
    # GT601: the outputs of one forward share its graph; a loss backpropagated with
    # `retain_graph=True` through one of them, then the step of that model's optimizer, then a
    # later loss reading another output: the later backward finds the saved weights changed.
    "sibling-output-after-step": (Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh())
                self.head = nn.Linear(8, 1)
            def forward(self, x):
                h = self.body(x)
                return self.head(h), h
        critic, gen = Critic(), nn.Linear(2, 4)
        opt_c = torch.optim.SGD(critic.parameters(), lr=0.1)
        opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
        real = torch.randn(8, 4)
        for _ in range(2):
            fake = gen(torch.randn(8, 2))
            score_real, h_real = critic(real)
            c_loss = F.softplus(-score_real).mean() + F.softplus(critic(fake.detach())[0]).mean()
            opt_c.zero_grad()
            c_loss.backward(retain_graph=True)
            opt_c.step()
            score_fake, h_fake = critic(fake)
            g_loss = F.softplus(-score_fake).mean() + F.mse_loss(h_fake.mean(0), h_real.detach().mean(0))
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
        """, "GT601", holds="gen.weight.grad is not None"), Shape("""
        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh())
                self.head = nn.Linear(8, 1)
            def forward(self, x):
                h = self.body(x)
                return self.head(h), h
        critic, gen = Critic(), nn.Linear(2, 4)
        opt_c = torch.optim.SGD(critic.parameters(), lr=0.1)
        opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
        real = torch.randn(8, 4)
        for _ in range(2):
            fake = gen(torch.randn(8, 2))
            score_real, h_real = critic(real)
            c_loss = F.softplus(-score_real).mean() + F.softplus(critic(fake.detach())[0]).mean()
            opt_c.zero_grad()
            c_loss.backward(retain_graph=True)
            opt_c.step()
            score_fake, h_fake = critic(fake)
            g_loss = F.softplus(-score_fake).mean() + F.mse_loss(h_fake.mean(0), h_real.mean(0))
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
        """, "GT601", line=19, raises=(RuntimeError, "modified by an inplace operation"))),
    # GT428: `self.net = net` keeps the caller's module; freezing it in the holder's
    # `__init__` freezes the module the caller trains (no copy).
    "holder-freezes-trained-module": (Shape("""
        import copy
        class Target:
            def __init__(self, net, tau=0.99):
                self.net = copy.deepcopy(net)
                self.net.requires_grad_(False)
                self.tau = tau
        def train(batches):
            net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
            target = Target(net)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for x in batches:
                loss = (net(x) - target.net(x + 0.1)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return net
        net = train([torch.randn(5, 4) for _ in range(3)])
        """, "GT428", holds="net[0].weight.requires_grad"), Shape("""
        class Target:
            def __init__(self, net, tau=0.99):
                self.net = net
                self.net.requires_grad_(False)
                self.tau = tau
        def train(batches):
            net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
            target = Target(net)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for x in batches:
                loss = (net(x) - target.net(x + 0.1)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return net
        net = train([torch.randn(5, 4) for _ in range(3)])
        """, "GT428", line=4, raises=(RuntimeError, "does not require grad"))),
    # the holder freezes a fixed feature network the caller never trains: nothing to report
    "holder-freezes-untrained-module": (Shape("""
        class FeatureLoss(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.features = features
                for p in self.features.parameters():
                    p.requires_grad = False
            def forward(self, a, b):
                return F.l1_loss(self.features(a), self.features(b))
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.vgg = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.body = nn.Linear(4, 4)
                self.crit = FeatureLoss(self.vgg)
            def forward(self, x, y):
                return self.crit(self.body(x), y)
        model = Model()
        opt = torch.optim.SGD(model.body.parameters(), lr=0.1)
        model(torch.randn(3, 4), torch.randn(3, 4)).backward()
        opt.step()
        """, "GT428", holds="model.body.weight.grad is not None"), Shape("""
        class FeatureLoss(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.features = features
                for p in self.features.parameters():
                    p.requires_grad = False
            def forward(self, a, b):
                return F.l1_loss(self.features(a), self.features(b))
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
                self.head = nn.Linear(4, 4)
                self.crit = FeatureLoss(self.body)
            def forward(self, x, y):
                return self.crit(self.head(self.body(x)), y)
        model = Model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(3, 4), torch.randn(3, 4)).backward()
        opt.step()
        """, "GT428", line=6, holds="model.body[0].weight.grad is None")),
    # GT139: a projection coefficient divides by the energy of the signal projected onto: an
    # all-zero row gives 0/0 = NaN in the loss, the gradients and then the weights.
    "projection-onto-silent-row": (Shape("""
        net = nn.Linear(6, 6)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        ref = torch.randn(4, 6)
        ref[2] = 0.0
        for _ in range(2):
            est = net(ref + torch.randn(4, 6))
            gain = torch.sum(est * ref, dim=1) / torch.sum(ref * ref, dim=1).clamp(min=1e-8)
            err = est - gain[:, None] * ref
            loss = err.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT139", holds="torch.isfinite(net.weight).all()"), Shape("""
        net = nn.Linear(6, 6)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        ref = torch.randn(4, 6)
        ref[2] = 0.0
        for _ in range(2):
            est = net(ref + torch.randn(4, 6))
            gain = torch.sum(est * ref, dim=1) / torch.sum(ref * ref, dim=1)
            err = est - gain[:, None] * ref
            loss = err.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT139", line=7, holds="torch.isnan(net.weight).all()")),
    # GT429: a wrapper forwarding `step()` only under a condition its settings make false
    # (`>` compared with the default 0): the wrapped optimizer is never stepped.
    "wrapper-step-ruled-out": (Shape("""
        class Stepper:
            def __init__(self, inner, warmup=0):
                self.inner, self.warmup, self.calls = inner, warmup, 0
            def step(self):
                self.calls += 1
                if self.calls >= self.warmup:
                    self.inner.step()
            def zero_grad(self):
                self.inner.zero_grad()
        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        opt = Stepper(torch.optim.SGD(net.parameters(), lr=0.1))
        for _ in range(3):
            opt.zero_grad()
            net(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
        """, "GT429", holds="not torch.equal(w0, net.weight)"), Shape("""
        class Stepper:
            def __init__(self, inner, accumulate=None):
                self.inner = inner
                self.accumulate = accumulate
                self.calls = 0
            def step(self):
                self.calls += 1
                if self.accumulate and self.calls % self.accumulate == 0:
                    self.inner.step()
            def zero_grad(self):
                self.inner.zero_grad()
        net = nn.Linear(3, 1)
        w0 = net.weight.detach().clone()
        opt = Stepper(torch.optim.SGD(net.parameters(), lr=0.1))
        for _ in range(3):
            opt.zero_grad()
            net(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
        """, "GT429", line=8, holds="torch.equal(w0, net.weight)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_is_silent(name):
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_is_reported(name):
    judge(PRELUDE, SHAPES[name][1])


# GT429 look-alike: a wrapper switched off on purpose around a scheduler (not an optimizer)
SCHEDULER_SWITCHED_OFF = Shape("""
    class MaybeSchedule:
        def __init__(self, sched, enabled=False):
            self.sched = sched
            self.enabled = enabled
        def step(self):
            if self.enabled:
                self.sched.step()
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = MaybeSchedule(torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5))
    for _ in range(3):
        opt.zero_grad()
        net(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
        sched.step()
    """, "GT429", holds="opt.param_groups[0]['lr'] == 0.1")


def test_gt429_scheduler_switched_off_is_silent():
    judge(PRELUDE, SCHEDULER_SWITCHED_OFF)
