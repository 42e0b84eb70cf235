"""False shapes of unseen code left by earlier rounds (docs/triage/fp56.md), each fixed at its
mechanism: a silent look-alike in another spelling than the project's, next to a buggy twin
that stays reported; run on real torch where the shape claims behaviour."""
from __future__ import annotations

import textwrap

import pytest

from tests.lint.shape_runner import Shape

torch = pytest.importorskip("torch")

PRELUDE = '''
import math
import numpy as np
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

# rewards of an environment summed by NumPy for the log, then discounted into returns copied
# by `torch.tensor`: Python numbers (NOTE [read raw by NumPy]); the twin adds a learned bonus
# to each reward, which the copy cuts off: the bonus network never gets a gradient
RETURNS = '''
class Walk:
    def reset(self):
        self.t = 0
        return np.zeros(3, dtype=np.float32)

    def step(self, a):
        self.t += 1
        return np.ones(3, dtype=np.float32) * self.t, float(a == 1), self.t >= 4, {{}}


class Agent(nn.Module):
    def __init__(self, gamma=0.9):
        super().__init__()
        self.gamma = gamma
        self.pi, self.v, self.bonus = nn.Linear(3, 2), nn.Linear(3, 1), nn.Linear(3, 1)

    def act(self, ob):
        return torch.distributions.Categorical(logits=self.pi(torch.as_tensor(ob))).sample().item()

    def train_on(self, env):
        opt = torch.optim.SGD(self.parameters(), lr=0.1)
        obs, acts, rwds, disc_rwds = [], [], [], []
        ob, done, t = env.reset(), False, 0
        while not done:
            act = self.act(ob)
            obs.append(ob)
            acts.append(act)
            ob, rwd, done, _ = env.step(act)
            {reward}
            rwds.append(rwd)
            disc_rwds.append(rwd * self.gamma ** t)
            t += 1
        {log}
        rets = torch.tensor([sum(disc_rwds[i:]) for i in range(len(disc_rwds))])
        x = torch.as_tensor(np.array(obs))
        logp = torch.distributions.Categorical(logits=self.pi(x)).log_prob(torch.as_tensor(acts))
        loss = (rets - self.v(x).squeeze(-1)) ** 2 - logp * rets
        opt.zero_grad()
        loss.mean().backward()
        opt.step()


agent = Agent()
agent.train_on(Walk())
bonus_trained = agent.bonus.weight.grad is not None
'''

# a closed-form target on a grid of angles, through a nested helper called twice and through
# a nested helper reading the grid from its closure; `acos` of a clamped cosine (GT752) on data
TARGET = '''
def target(theta, phi):
    def angle(theta, phi, c):
        cos = torch.sin(theta) * math.sin(c) * torch.cos(phi - c) + torch.cos(theta) * math.cos(c)
        return torch.acos(torch.clamp(cos, -1.0, 1.0))

    return torch.exp(-angle(theta, phi, 0.4) ** 2) + torch.exp(-angle(theta, phi, 1.2) ** 2)


def bump(theta, phi):
    def angle(c):
        cos = torch.sin(theta) * math.sin(c) * torch.cos(phi - c) + torch.cos(theta) * math.cos(c)
        return torch.acos(torch.clamp(cos, -1.0, 1.0))

    return torch.exp(-angle(0.4) ** 2)


theta = torch.linspace(0.0, 3.0, 31)
phi = torch.linspace(0.0, 3.0, 31){trainable}
net = nn.Linear(2, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
pred = net(torch.stack([theta, phi], -1)).squeeze(-1)
loss = ((pred - {y}) ** 2).mean()
opt.zero_grad()
loss.backward()
opt.step()
finite = theta.grad is None or bool(torch.isfinite(theta.grad).all())
'''

# a power-iteration helper filtering the NaNs of `v / |v|`, called with the weight under
# `torch.no_grad()` and on detached values (NOTE [calls handing data]); the twin calls it with
# the weight, grad on, in the loss: the NaN filtered in the value stays in the gradient
POWER = '''
def unit(v):
    sign = v / torch.abs(v)
    sign[torch.isnan(sign)] = 1.0
    return sign * torch.abs(v) / torch.abs(v).max()


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
        self.register_buffer("u", torch.tensor([1.0, 0.0]))

    def forward(self, x):
        with torch.no_grad():
            for _ in range(3):
                self.u.copy_(unit(self.weight @ self.u))
        sigma = {sigma}
        return x @ (self.weight / sigma).t()


layer = Layer()
start = unit(layer.weight.detach()[0])
layer(torch.ones(4, 2)).sum().backward()
nan_grad = bool(torch.isnan(layer.weight.grad).any())
'''

TRAINABLE = ".requires_grad_()\ntheta.requires_grad_()"
BOTH = "target(theta, phi) + bump(theta, phi)"

SHAPES = {
    "env-rewards-summed-by-numpy-copied-into-returns": (
        Shape(RETURNS.format(reward="", log="print(np.sum(rwds))"), "GT104",
              holds="not bonus_trained"),
        Shape(RETURNS.format(reward="rwd = rwd + self.bonus(torch.as_tensor(ob)).squeeze()",
                             log="print(float(sum(rwds)))"), "GT104", line=34,
              holds="not bonus_trained")),
    "nested-helper-called-on-a-grid-of-data": (
        Shape(TARGET.format(trainable="", y=BOTH), "GT752", holds="finite"),
        Shape(TARGET.format(trainable=TRAINABLE, y="target(theta, phi) + bump(theta.detach(), phi.detach())"),
              "GT752", line=4, holds="not finite")),
    "nested-helper-reading-a-grid-from-its-closure": (
        Shape(TARGET.format(trainable="", y=BOTH), "GT752", holds="finite"),
        Shape(TARGET.format(trainable=TRAINABLE, y="target(theta.detach(), phi.detach()) + bump(theta, phi)"),
              "GT752", line=12, holds="not finite")),
    "nan-filtered-helper-called-under-no-grad": (
        Shape(POWER.format(sigma="torch.dot(self.u, self.weight @ self.u)"), "GT757",
              holds="not nan_grad"),
        Shape(POWER.format(sigma="unit(self.weight @ self.u).sum()"), "GT757", line=2,
              holds="nan_grad")),
}


@pytest.mark.parametrize("name,which", [(n, i) for n in SHAPES for i in (0, 1)])
def test_shape(tmp_path, name: str, which: int) -> None:
    """Checked as a file of a two-file project (the reverse index answers: no other file
    calls the helpers), then run."""
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    shape = SHAPES[name][which]
    source = PRELUDE + textwrap.dedent(shape.src).lstrip("\n")
    (tmp_path / "shape.py").write_text(source)
    (tmp_path / "run.py").write_text("import shape\n")
    found = check_paths([str(tmp_path)], Settings(select=(shape.code,))).findings
    offset = PRELUDE.count("\n")
    assert sorted((f.line - offset, f.code) for f in found) == (
        [] if shape.line is None else [(shape.line, shape.code)])
    env: dict = {}
    exec(compile(source, "shape.py", "exec"), env)
    assert eval(shape.holds, env)


# an override whose only callers run it under `no_grad`, one of them in a notebook export with
# a broken cell elsewhere (NOTE [unparsable reader]); twins: the notebook calls it with grad on,
# or the broken cell itself holds the call (unknown: kept)
LEARNER = '''
import torch
import torch.nn as nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 3)

    def forward(self, x):
        return self.net(x)


class Cosine(Base):
    def classify(self, batch, train_dataset=None):
        means = [[] for _ in range(3)]
        for sample, label in train_dataset:
            f = self.net(sample)
            f = f / f.norm()
            means[label].append(f)
        centers = torch.stack([torch.stack(m).mean(0) for m in means])
        return (self.net(batch) @ centers.t()).argmax(1), centers
'''
NOTEBOOK = '''
import torch
from learner import Cosine

model = Cosine()
data = [(torch.randn(4), i % 3) for i in range(6)]
{call}
print(preds.shape)
plot(centers, labels{broken})
'''
OFF = "with torch.no_grad():\n    preds, centers = model.classify(torch.randn(5, 4), data)"
ON = "preds, centers = model.classify(torch.randn(5, 4), data)"


@pytest.mark.parametrize("call,broken,line", [
    (OFF, "[]", None),                                        # look-alike: silent
    (ON, "[]", 20),                                           # grad on: the graph is kept
    ("preds = centers = None", "[], model.classify(x, data[])", 20),  # call in the broken cell
])
def test_caller_in_a_notebook_that_does_not_parse(tmp_path, call, broken, line) -> None:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    (tmp_path / "learner.py").write_text(LEARNER.lstrip("\n"))
    (tmp_path / "notebook_ipynb.py").write_text(NOTEBOOK.format(call=call, broken=broken))
    found = check_paths([str(tmp_path)], Settings(select=("GT505",))).findings
    assert [f.line for f in found if f.code == "GT505"] == ([] if line is None else [line])
    if line is None or call == ON:  # the classes as the notebook runs them, up to its cell
        env: dict = {}
        exec(compile(LEARNER, "learner.py", "exec"), env)
        model = env["Cosine"]()
        data = [(torch.randn(4), i % 3) for i in range(6)]
        with torch.set_grad_enabled(call == ON):
            _, centers = model.classify(torch.randn(5, 4), data)
        assert (centers.grad_fn is not None) == (call == ON)
