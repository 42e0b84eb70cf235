"""Session 40, helper recall40b: facts that name the root line of real-world misses in other
words than the cases. Each pair: a look-alike that is silent (and trains as meant on real
torch) and a buggy twin reported on its line (and shown wrong on real torch)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

# NOTE [leftover from another loss] (GT555): a script GAN loop that clears each optimizer
# right after its own step; the generator's loss runs the critic after the critic's clear
SCRIPT_TWIN = '''
import torch
from torch import nn

torch.manual_seed(0)
gen = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4))
critic = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
g_opt = torch.optim.SGD(gen.parameters(), lr=0.05)
c_opt = torch.optim.SGD(critic.parameters(), lr=0.05)
for _ in range(4):
    real, noise = torch.randn(16, 4), torch.randn(16, 3)
    c_loss = critic(gen(noise).detach()).mean() - critic(real).mean()
    c_loss.backward()
    c_opt.step()
    c_opt.zero_grad()
    g_loss = -critic(gen(noise)).mean()
    g_loss.backward()
    g_opt.step()
    g_opt.zero_grad()
RESULT = torch.cat([p.detach().flatten() for p in critic.parameters()])
'''
SCRIPT_LOOKALIKE = SCRIPT_TWIN.replace(
    "    c_loss = critic(gen(noise).detach()).mean() - critic(real).mean()\n",
    "    c_opt.zero_grad()\n"
    "    c_loss = critic(gen(noise).detach()).mean() - critic(real).mean()\n").replace(
    "    c_opt.step()\n    c_opt.zero_grad()\n", "    c_opt.step()\n")

# the same bug written as a trainer class: both models inside one wrapper module whose forward
# picks the critic's loss by a flag (default: the generator's adversarial loss, which runs the
# critic), optimizers built in __init__ over the wrapper's submodules, the generator stepped
# first in one step method (one call per batch)
WRAPPER_TWIN = '''
import torch
from torch import nn


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.maker = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4))
        self.judge = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, noise, real, judge_pass=False):
        made = self.maker(noise)
        if judge_pass:
            return self.judge(made.detach()).mean() - self.judge(real).mean()
        return (made - real).pow(2).mean() - 0.1 * self.judge(made).mean()


class Runner:
    def __init__(self, pair):
        self.pair = pair
        self.maker_opt = torch.optim.SGD(pair.maker.parameters(), lr=0.05)
        self.judge_opt = torch.optim.SGD(pair.judge.parameters(), lr=0.05)

    def update(self, noise, real):
        total = self.pair(noise, real)
        total.backward()
        self.maker_opt.step()
        self.maker_opt.zero_grad()
        j_loss = self.pair(noise, real, judge_pass=True)
        j_loss.backward()
        self.judge_opt.step()
        self.judge_opt.zero_grad()


torch.manual_seed(0)
runner = Runner(Pair())
for _ in range(4):
    runner.update(torch.randn(16, 3), torch.randn(16, 4))
RESULT = torch.cat([p.detach().flatten() for p in runner.pair.judge.parameters()])
'''
WRAPPER_LOOKALIKE = WRAPPER_TWIN.replace(
    "        j_loss = self.pair(noise, real, judge_pass=True)\n",
    "        self.judge_opt.zero_grad()\n        j_loss = self.pair(noise, real, judge_pass=True)\n")
# look-alike: the generator's loss does not run the critic (a plain reconstruction loss), so
# clearing after the step leaves nothing behind
NO_ADVERSARY = WRAPPER_TWIN.replace(
    "        return (made - real).pow(2).mean() - 0.1 * self.judge(made).mean()",
    "        return (made - real).pow(2).mean()")
# look-alike: the critic is frozen while the generator's loss backwards (CycleGAN's
# set_requires_grad): its parameters get no gradient from it
FROZEN = SCRIPT_TWIN.replace(
    "    g_loss = -critic(gen(noise)).mean()\n",
    "    critic.requires_grad_(False)\n    g_loss = -critic(gen(noise)).mean()\n").replace(
    "    g_opt.zero_grad()\n", "    g_opt.zero_grad()\n    critic.requires_grad_(True)\n")

# look-alike: the critic's gradients are set to None by hand after the generator's step
CLEARED_BY_HAND = SCRIPT_TWIN.replace(
    "    g_opt.zero_grad()\n",
    "    g_opt.zero_grad()\n    for p in critic.parameters():\n        p.grad = None\n")


def _gt555(src: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src), path="m.py") if f.code == "GT555"]


def _line(src: str, text: str) -> int:
    return next(i for i, s in enumerate(src.splitlines(), 1) if text in s)


def _result(src: str):
    env: dict = {}
    exec(compile(src, "m.py", "exec"), env)  # noqa: S102 - the test's own source
    return env["RESULT"]


@pytest.mark.parametrize("twin, lookalike, clear", [
    (SCRIPT_TWIN, SCRIPT_LOOKALIKE, "c_opt.zero_grad()"),
    (WRAPPER_TWIN, WRAPPER_LOOKALIKE, "self.judge_opt.zero_grad()"),
], ids=["script", "wrapper"])
def test_leftover_from_other_loss(twin: str, lookalike: str, clear: str) -> None:
    assert _gt555(twin) == [_line(twin, clear)]
    assert _gt555(lookalike) == []
    # on torch: the twin's critic ends elsewhere than the one stepped on its own loss only
    assert (_result(twin) - _result(lookalike)).abs().max().item() > 1e-4


@pytest.mark.parametrize("src", [NO_ADVERSARY, FROZEN, CLEARED_BY_HAND],
                         ids=["no-adversary", "frozen", "cleared-by-hand"])
def test_leftover_lookalikes_silent(src: str) -> None:
    assert _gt555(src) == []


# NOTE [state loaded then rebuilt] (GT556): a resume helper that loads the saved state, then
# builds the optimizer again with the run's learning rate
REBUILD_TWIN = '''
import torch
from torch import nn


def make_run(net, saved, lr):
    opt = torch.optim.Adam(net.parameters())
    if saved is not None:
        opt.load_state_dict(saved)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    return opt


def steps(net, opt, n):
    for _ in range(n):
        opt.zero_grad()
        net(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()


torch.manual_seed(0)
net = nn.Linear(3, 2)
first = make_run(net, None, 0.01)
steps(net, first, 3)
again = make_run(net, first.state_dict(), 0.01)
RESULT = len(again.state)
'''
REBUILD_LOOKALIKE = REBUILD_TWIN.replace(
    "    opt = torch.optim.Adam(net.parameters())\n    if saved is not None:\n"
    "        opt.load_state_dict(saved)\n    opt = torch.optim.Adam(net.parameters(), lr=lr)\n",
    "    opt = torch.optim.Adam(net.parameters(), lr=lr)\n    if saved is not None:\n"
    "        opt.load_state_dict(saved)\n")

# the same bug one call away: a trainer whose resume loads into `self.opt`, then calls its own
# `configure()`, which binds `self.opt` to a new optimizer
METHOD_TWIN = '''
import torch
from torch import nn


class Fitter:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def configure(self, lr):
        self.opt = torch.optim.SGD(self.net.parameters(), lr=lr, momentum=0.9)

    def resume(self, saved, lr):
        self.opt.load_state_dict(saved)
        self.configure(lr)

    def fit(self, n):
        for _ in range(n):
            self.opt.zero_grad()
            self.net(torch.randn(4, 3)).pow(2).mean().backward()
            self.opt.step()


torch.manual_seed(0)
fitter = Fitter(nn.Linear(3, 2))
fitter.fit(3)
saved = fitter.opt.state_dict()
fitter.resume(saved, 0.1)
RESULT = len(fitter.opt.state)
'''
# look-alike: the method only builds when nothing is there yet
METHOD_LOOKALIKE = METHOD_TWIN.replace(
    "    def configure(self, lr):\n        self.opt =",
    "    def configure(self, lr):\n        if self.opt is None:\n            self.opt =")
# look-alike: the loaded optimizer trains a stage, then a new one is built for the next stage
STAGED = REBUILD_TWIN.replace(
    "        opt.load_state_dict(saved)\n",
    "        opt.load_state_dict(saved)\n        steps(net, opt, 1)\n")

# the load one call further: a runner's `restore()` loads its optimizer's state, and the
# function that resumes then calls its `setup()`, which builds the optimizer again
CALLER_TWIN = '''
import torch
from torch import nn


def make(net, lr):
    return torch.optim.Adam(net.parameters(), lr=lr)


class Runner:
    def __init__(self, net):
        self.net = net
        self.optimizer = make(net, 0.01)

    def restore(self, saved):
        self.optimizer.load_state_dict(saved)

    def setup(self, lr):
        self.optimizer = make(self.net, lr)

    def fit(self, n):
        for _ in range(n):
            self.optimizer.zero_grad()
            self.net(torch.randn(4, 3)).pow(2).mean().backward()
            self.optimizer.step()


def resume(net, saved, lr):
    runner = Runner(net)
    runner.restore(saved)
    runner.setup(lr)
    return runner


torch.manual_seed(0)
first = Runner(nn.Linear(3, 2))
first.fit(3)
again = resume(first.net, first.optimizer.state_dict(), 0.01)
RESULT = len(again.optimizer.state)
'''
CALLER_LOOKALIKE = CALLER_TWIN.replace(
    "    runner.restore(saved)\n    runner.setup(lr)\n",
    "    runner.setup(lr)\n    runner.restore(saved)\n")


def _gt556(src: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src), path="m.py") if f.code == "GT556"]


@pytest.mark.parametrize("twin, lookalike, at", [
    (REBUILD_TWIN, REBUILD_LOOKALIKE, "    opt = torch.optim.Adam(net.parameters(), lr=lr)"),
    (METHOD_TWIN, METHOD_LOOKALIKE, "        self.configure(lr)"),
    (CALLER_TWIN, CALLER_LOOKALIKE, "    runner.setup(lr)"),
], ids=["same-function", "method", "load-in-a-method"])
def test_optimizer_rebuilt_after_state_load(twin: str, lookalike: str, at: str) -> None:
    assert _gt556(twin) == [_line(twin, at)]
    assert _gt556(lookalike) == []
    # on torch: the twin's optimizer has lost the saved moments; the look-alike's keeps them
    assert _result(twin) == 0
    assert _result(lookalike) > 0


def test_rebuilt_after_a_stage_is_silent() -> None:
    assert _gt556(STAGED) == []
