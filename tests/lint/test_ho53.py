"""Session 53, helper ho53: general facts behind held-out batch 47's misses. Each shape: a
buggy twin with its code and line, and silent look-alikes, in another style than the case."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [a held optimizer never stepped]: a per-batch method of a trainer clears and fills the
# gradients of `self.opt`; nothing in the file steps it (checked on torch 2.13: the weights
# stay bit-identical)
LEARNER = '''
import torch
from torch import nn
{base_import}

class Learner{base}:
    def __init__(self, net, lr):
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, 0.9)

    def training_step(self, batch):
        inputs, targets = batch
        self.opt.zero_grad()
        out = self.net(inputs)
        loss = nn.functional.cross_entropy(out, targets)
        loss.backward()
        {after}
        return float(loss)


def run(learner, data, epochs):
    for _ in range(epochs):
        it = iter(data)
        while True:
            try:
                learner.training_step(next(it))
            except StopIteration:
                break
        {outside}
'''


@pytest.mark.parametrize("after, outside, base, expected", [
    ("learner_log = None", "pass", "", [17]),                  # no step at all: the backward
    ("self.sched.step()", "pass", "", [18]),                   # the schedule stepped instead
    ("self.opt.step()", "learner.sched.step()", "", []),       # stepped in the method
    ("self.sched.step()", "learner.opt.step()", "", []),       # stepped by the caller
    ("self.sched.step()", "pass", "(BaseLearner)", []),        # a base out of sight may step it
])
def test_held_optimizer_never_stepped(after, outside, base, expected):
    src = LEARNER.format(after=after, outside=outside, base=base,
                         base_import="from lib import BaseLearner" if base else "")
    assert _found(src, "GT544") == expected


# NOTE [reused through a per-pass function]: a file-level value with a graph, read by a
# function a file-level loop calls (checked on torch 2.13: the second call raises 'Trying to
# backward through the graph a second time'; under no_grad it trains)
PER_PASS = '''
import torch
from torch import nn

encoder = nn.Linear(4, 8)
head = nn.Linear(8, 1)
images = torch.randn(16, 4)
labels = torch.randn(16, 1)
{feats}
opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()])


def train_once():
    {inside}
    opt.zero_grad()
    loss = nn.functional.mse_loss(head(feats), labels)
    loss.backward()
    opt.step()


if __name__ == "__main__":
    {run}
'''


@pytest.mark.parametrize("feats, inside, run, expected", [
    ("feats = encoder(images)", "pass", "for epoch in range(3):\n        train_once()", [9]),
    ("feats = encoder(images)", "pass", "while True:\n        train_once()", [9]),
    ("with torch.no_grad():\n    feats = encoder(images)", "pass",
     "for epoch in range(3):\n        train_once()", []),
    ("feats = encoder(images).detach()", "pass", "for epoch in range(3):\n        train_once()", []),
    ("feats = None", "feats = encoder(images)", "for epoch in range(3):\n        train_once()", []),
    ("feats = encoder(images)", "pass", "train_once()", []),  # called once: no second backward
])
def test_file_level_graph_reused_by_a_per_pass_function(feats, inside, run, expected):
    src = PER_PASS.format(feats=feats, inside=inside, run=run)
    assert _found(src, "GT507") == expected


# NOTE [the training path run with grad off]: an evaluation runs with grad off the loss the
# training loop backpropagates, whose helper differentiates (checked on torch 2.13: `element 0
# of tensors does not require grad`); the block is named, not the training code
CRITIC = '''
import torch
from torch import nn


def gradient_penalty(critic, x):
    x = x.clone().requires_grad_(True)
    score = critic(x)
    g = torch.autograd.grad(outputs=score.sum(), inputs=x, create_graph=True)[0]
    return ((g.norm(dim=1) - 1) ** 2).mean()


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x)

    def loss(self, x):
        {turn_on}
        return self(x).mean() + gradient_penalty(self, x)

    def score(self, x):
        return self(x).mean() + sharpness(self, x)


def sharpness(critic, x):
    x = x.clone().requires_grad_(True)
    s = critic(x)
    return torch.autograd.grad(s.sum(), x)[0].abs().mean()


def train(critic, opt, data):
    for x in data:
        opt.zero_grad()
        critic.loss(x).backward()
        opt.step()


def evaluate(critic, data):
    {off}
    out = [critic.{method}(x).item() for x in data]
    {on}
    return out


critic = Critic()
data = [torch.randn(8, 2) for _ in range(3)]
train(critic, torch.optim.SGD(critic.parameters(), lr=0.01), data)
evaluate(critic, data)
'''


@pytest.mark.parametrize("off, on, method, turn_on, expected", [
    ("with torch.no_grad():\n        pass", "pass", "loss", "pass", []),        # block empty
    ("torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)", "loss", "pass", [43]),
    ("torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)", "loss",
     "torch.set_grad_enabled(True)", []),                                       # turned back on
    ("torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)", "score", "pass", []),
    # (a helper only the evaluation runs: no training path; the statement's direct reading)
])
def test_training_path_under_grad_off_statement(off, on, method, turn_on, expected):
    src = CRITIC.format(off=off, on=on, method=method, turn_on=turn_on)
    assert _found(src, "GT210") == expected


def test_training_path_under_no_grad_block_names_the_block():
    src = CRITIC.format(off="with torch.no_grad():\n        pass", on="pass", method="loss",
                        turn_on="pass").replace(
        "    with torch.no_grad():\n        pass\n    out = [",
        "    with torch.no_grad():\n        out = [")
    assert _found(src, "GT210") == [43]
    # a method only the evaluation runs: the call that hands the work over is named
    assert _found(src.replace("critic.loss(x).item()", "critic.score(x).item()"),
                  "GT210") == [26]


# NOTE [a non-leaf put in a module's parameters]: a reparametrising wrapper stores its computed
# weight in the wrapped layer's `_parameters` on every forward (checked on torch 2.13: an
# optimizer built from `.parameters()` after one forward raises `can't optimize a non-leaf
# Tensor`; built before, it does not)
NOISY = '''
import torch
import torch.nn.functional as F
from torch import nn


class WeightNoise(nn.Module):
    def __init__(self, layer, sigma):
        super().__init__()
        self.layer, self.sigma = layer, sigma
        self.base = nn.Parameter(layer.weight.detach().clone())

    def perturb(self):
        {write}

    def {method}(self, x):
        self.perturb()
        return self.layer(x)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = WeightNoise(nn.Linear(6, 6), 0.1)
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        return self.out(F.relu(self.block(x)))


def main():
    head = Head()
    {first}
    {second}


main()
'''
WRITE = 'self.layer._parameters["weight"] = torch.add(self.base, torch.randn_like(self.base), alpha=self.sigma)'
RUN = "print(head(torch.randn(3, 6)).shape)"
BUILD = "opt = torch.optim.Adam(head.parameters(), lr=1e-3)"


@pytest.mark.parametrize("write, method, first, second, expected", [
    (WRITE, "forward", RUN, BUILD, [14]),
    (WRITE, "forward", BUILD, RUN, []),                       # built before the first forward
    (WRITE, "apply_noise", RUN, BUILD, []),                   # not a forward: a step of its own
    ('self.layer._parameters["weight"] = nn.Parameter(self.base + 0.0)', "forward", RUN, BUILD,
     []),                                                     # a leaf Parameter
])
def test_computed_tensor_in_parameters(write, method, first, second, expected):
    src = NOISY.format(write=write, method=method, first=first, second=second)
    assert _found(src, "GT485") == expected
