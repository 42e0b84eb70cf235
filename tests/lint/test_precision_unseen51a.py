"""Shapes from the projects of docs/triage/unseen51a.md (session 51), each in another
spelling than the project's and next to a buggy twin that is still reported; the torch ones
run on real torch."""
from __future__ import annotations

import pytest

from imports_as_found import imports_as_found
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

# an image helper that hands its argument back where it is no tensor, the evaluation loop
# summing a NumPy error of two images it made
IMAGE = '''
def as_image(t, kind=np.uint8):
    if not isinstance(t, np.ndarray):
        if isinstance(t, torch.Tensor):
            arr = t.data.cpu().float().numpy()
        else:
            return t
        arr = (np.transpose(arr, (1, 0)) + 1) / 2.0 * 255.0
    else:
        arr = t
    return arr.astype(kind)


def lab_error(a, b):
    return a.astype(np.float64) - b.astype(np.float64)


def score(net, batches):
    net.eval()
    total = 0
    for x, y in batches:
        out = net(x)
{line}
    return total
net = nn.Linear(3, 3)
total = score(net, [(torch.randn(2, 3), torch.randn(2, 3)) for _ in range(3)])
'''

HEAD = '''
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.eye(3))

    def forward(self, x, c):
        nx = x / x.norm(dim=1, keepdim=True)
        cos_val, sin_val = self.cos_sin(nx, c)
        return (nx - cos_val * {use}) @ self.w

    def cos_sin(self, x, y):
        cos_val = (x * y).sum(-1, keepdim=True) / x.norm(dim=1, keepdim=True)
        sin_val = (1 - cos_val * cos_val).sqrt()
        return cos_val, sin_val
head = Head()
x = torch.tensor([[1.0, 0.0, 0.0]], requires_grad=True)
head(x, x.detach()).sum().backward()
'''

# one update per run, picked by a setting read through a configuration accessor
ACCESSOR = '''
class Cfg:
    step, mode = "ICM", "RF"


def config():
    return Cfg


def learn(net, head_a, head_b, opt, x):
    shared = net(x).pow(2).mean()
    if config().step == "ICM":
        loss = head_a(x).mean() + shared
        loss.backward()
    if config().{key} == "RF":
        loss = head_b(x).mean() + shared
        loss.backward()
    opt.step()
net, a, b = nn.Linear(3, 3), nn.Linear(3, 1), nn.Linear(3, 1)
learn(net, a, b, torch.optim.SGD(net.parameters(), lr=0.1), torch.randn(4, 3))
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # tsingqguo/exposure-fusion-shadow-removal: the evaluation sums RMSEs NumPy computes from
    # `tensor2im(...)` images, pix2pix's helper that returns its argument unchanged where it
    # is an array or no tensor at all; GT505 read the helper as handing the model's output
    # back with its graph. Twin: the helper gives the tensor itself back (reported).
    "pass-through-image-helper": (
        Shape(IMAGE.format(line="        d = lab_error(as_image(out), as_image(y))\n"
                                "        rmse = np.sqrt((d ** 2).mean(axis=0))\n"
                                "        total += rmse.sum()"),
              "GT505", holds="isinstance(total, float)"),
        Shape(IMAGE.replace("            return t\n", "            return t\n        return t\n")
              .format(line="        total += ((as_image(out) - y) ** 2).mean()"),
              "GT505", line=23, holds="total.requires_grad")),
    # KaihuaTang/Long-Tailed-Recognition.pytorch (Causal-Norm classifier): the helper
    # computes `sin = (1 - cos * cos).sqrt()` beside the cosine and the one caller keeps only
    # the cosine; GT753 said the sqrt's infinite derivative at |cos| = 1 reaches training.
    # Twin: the forward uses the sine (reported; its gradient is NaN at cos = 1).
    "dropped-sine-element": (
        Shape(HEAD.format(use="c"), "GT753", holds="torch.isfinite(x.grad).all()"),
        Shape(HEAD.format(use="c * sin_val"), "GT753", line=13,
              holds="not torch.isfinite(x.grad).all()")),
    # bdvllrs/curiosity-driven-rl-agents: `if config().sim.agent.step == "ICM":` and later
    # `if config().sim.agent.step == "RF":` pick one update per run; GT509 said the second
    # arm's backward runs through the graph the first freed. Twin: the second arm tests
    # another setting, both run and the second backward raises.
    "exclusive-config-accessor": (
        Shape(ACCESSOR.format(key="step"), "GT509"),
        Shape(ACCESSOR.format(key="mode"), "GT509", line=13,
              raises=(RuntimeError, "backward through the graph a second time"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


# bdvllrs/curiosity-driven-rl-agents: the curious agent's `learn` unpacks
# `loss_critic, actor_loss = self.get_losses(...)`, a method of its base class in another
# file whose two losses run through separate critic calls; GT509 read the two names as one
# graph (the helper out of sight). Twin: both losses read one critic call (reported; the
# second backward raises).
AGENT = '''
import torch
import torch.nn as nn


class Agent:
    def __init__(self):
        self.actor = nn.Linear(4, 2)
        self.critic = nn.Linear(6, 1)
        self.actor_opt = torch.optim.SGD(self.actor.parameters(), lr=0.1)

    def get_losses(self, s, a, r):
        q = self.critic(torch.cat([s, a], 1))
        loss_critic = (r - q).pow(2).mean()
        actor_loss = -{actor}.mean()
        return loss_critic, actor_loss
'''

CURIOUS = '''
import torch
from .agents import Agent


class Curious(Agent):
    def learn(self, s, a, r):
        loss_critic, actor_loss = self.get_losses(s, a, r)
        loss_critic.backward()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()
'''


@pytest.mark.parametrize("actor,lines", [
    ("self.critic(torch.cat([s, self.actor(s)], 1))", []), ("q", [9])],
    ids=["look-alike", "twin"])
def test_loss_helper_of_a_base_class(tmp_path, actor: str, lines: list[int]) -> None:
    import importlib
    import sys
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    pkg = tmp_path / "agentpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agents.py").write_text(AGENT.replace("{actor}", actor))
    (pkg / "curious.py").write_text(CURIOUS)
    found = check_paths([str(pkg)], Settings()).findings
    assert sorted(f.line for f in found if f.code == "GT509") == lines
    with imports_as_found(tmp_path):  # `agentpkg` and its modules gone afterwards
        for m in [m for m in sys.modules if m == "agentpkg" or m.startswith("agentpkg.")]:
            del sys.modules[m]  # another file's package of that name: back afterwards
        agent = importlib.import_module("agentpkg.curious").Curious()
        args = (torch.randn(3, 4), torch.randn(3, 2), torch.randn(3, 1))
        if lines:
            with pytest.raises(RuntimeError, match="second time"):
                agent.learn(*args)
        else:
            agent.learn(*args)
            assert agent.actor.weight.grad is not None
