"""Session 39 (prec39b): GT509 fires only on a shared graph the code in sight proves
(NOTE [proven shared graph], docs/triage/prec39b.md). Each look-alike is the false-alarm shape
of unseen code (silent, and it trains); each twin is the provable form (reported, and it raises
'Trying to backward through the graph a second time')."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

from imports_as_found import imports_as_found

torch = pytest.importorskip("torch")

# another file of the project: a policy and a loss module whose bodies the checked file does
# not show (xuance's policy, 1d-tokenizer's loss module)
_ELSEWHERE = '''
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.actor = nn.Linear(4, 2)

    def model_forward(self, x):
        return self.encoder(x)

    def actor_forward(self, feats):
        return self.actor(feats.detach())


class GanLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.disc = nn.Linear(4, 1)

    def forward(self, real, fake, mode="generator"):
        if mode == "discriminator":
            return (self.disc(fake.detach()) - self.disc(real)).mean()
        return -self.disc(fake).mean()
'''


def _project(root: Path, text: str) -> Path:
    (root / "elsewhere_p39b.py").write_text(textwrap.dedent(_ELSEWHERE).lstrip("\n"))
    p = root / "learner.py"
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _found(path: Path) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(path)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code == "GT509")


def _run(path: Path) -> None:
    with imports_as_found(path.parent):  # `elsewhere_p39b` gone afterwards
        runpy.run_path(str(path), run_name="__main__")


# -- the value is made, and read again, by methods of an object built in another file ---------
# xuance's Dreamer learner: `self.policy.model_forward(...)` makes the features, the world
# model's loss is backpropagated, then `self.policy.actor_critic_forward(features, ...)`, which
# starts from `features.detach()` in its own file, makes the actor's loss. Nothing in sight says
# the second pass reaches the first graph.

_POLICY = '''
import torch
from elsewhere_p39b import Policy


class Learner:
    def __init__(self, policy, opt):
        self.policy = policy
        self.opt = opt

    def update(self, obs):
        feats = self.policy.model_forward(obs)
        model_loss = feats.pow(2).mean()
        self.opt.zero_grad()
        model_loss.backward()
        self.opt.step()
        out = self.policy.actor_forward(feats)
        actor_loss = -out.mean()
        self.opt.zero_grad()
        actor_loss.backward()
        self.opt.step()


policy = Policy()
learner = Learner(policy, torch.optim.SGD(policy.parameters(), lr=0.1))
for _ in range(2):
    learner.update(torch.randn(8, 4))
'''

_POLICY_IN_SIGHT = '''
import torch
import torch.nn as nn


class Learner:
    def __init__(self):
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)
        self.opt = torch.optim.SGD([*self.encoder.parameters(), *self.head.parameters()], lr=0.1)

    def update(self, obs):
        feats = self.encoder(obs)
        model_loss = feats.pow(2).mean()
        self.opt.zero_grad()
        model_loss.backward()
        self.opt.step()
        out = self.head(feats)
        actor_loss = -out.mean()
        self.opt.zero_grad()
        actor_loss.backward()
        self.opt.step()


learner = Learner()
for _ in range(2):
    learner.update(torch.randn(8, 4))
'''


def test_methods_of_an_object_built_elsewhere_are_silent(tmp_path: Path) -> None:
    p = _project(tmp_path, _POLICY)
    assert _found(p) == []
    _run(p)  # trains: the actor's forward detaches in its own file


def test_modules_in_sight_are_reported(tmp_path: Path) -> None:
    p = _project(tmp_path, _POLICY_IN_SIGHT)
    assert _found(p) == [("GT509", 17)]
    with pytest.raises(RuntimeError, match="second time"):
        _run(p)


# -- the loss is reached from the shared value only through a callable passed in -------------
# 1d-tokenizer: `loss_module(images, reconstructed, ..., mode="discriminator")` after the
# generator's pass; the loss module detaches the reconstruction in that mode, in its own file.
# The twin's loss is a function of this file that does not detach.

_LOSS_MODULE = '''
import torch
import torch.nn as nn
from elsewhere_p39b import GanLoss


def train(model, loss_module, opt_g, opt_d, batches):
    for real in batches:
        recon = model(real)
        g_loss = loss_module(real, recon, mode="generator")
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        d_loss = loss_module(real, recon, mode="discriminator")
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()


model, loss_module = nn.Linear(4, 4), GanLoss()
train(model, loss_module, torch.optim.SGD(model.parameters(), lr=0.1),
      torch.optim.SGD(loss_module.parameters(), lr=0.1), [torch.randn(8, 4) for _ in range(2)])
'''

_LOSS_IN_SIGHT = '''
import torch
import torch.nn as nn


def gan_loss(disc, real, fake, mode="generator"):
    if mode == "discriminator":
        return (disc(fake) - disc(real)).mean()
    return -disc(fake).mean()


def train(model, disc, opt_g, opt_d, batches):
    for real in batches:
        recon = model(real)
        g_loss = gan_loss(disc, real, recon, mode="generator")
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        d_loss = gan_loss(disc, real, recon, mode="discriminator")
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()


model, disc = nn.Linear(4, 4), nn.Linear(4, 1)
train(model, disc, torch.optim.SGD(model.parameters(), lr=0.1),
      torch.optim.SGD(disc.parameters(), lr=0.1), [torch.randn(8, 4) for _ in range(2)])
'''


def test_loss_through_a_callable_passed_in_is_silent(tmp_path: Path) -> None:
    p = _project(tmp_path, _LOSS_MODULE)
    assert _found(p) == []
    _run(p)


def test_loss_function_in_sight_is_reported(tmp_path: Path) -> None:
    p = _project(tmp_path, _LOSS_IN_SIGHT)
    assert _found(p) == [("GT509", 18)]
    with pytest.raises(RuntimeError, match="second time"):
        _run(p)


# -- GT601: the later loss reaches the stepped module only through an argument ---------------
# xuance's NPG learner: `self.critic_optimizer` steps `self.model.critic` between
# `c_loss.backward(retain_graph=True)` and `a_loss.backward()`; `a_loss` reads the actor's
# entry of `self.model(obs)` and tensors made from the `samples` argument. An argument of
# unknown origin proves no graph through the critic (NOTE [proven shared graph]); the model
# has separate heads and trains. The twin's actor loss calls the stepped critic in sight
# ('modified by an inplace operation').

_NPG = 'import torch\nimport torch.nn as nn\n\n\nclass ActorCritic(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.actor = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))\n        self.critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))\n\n    def forward(self, x):\n        return {"logits": self.actor(x), "values": self.critic(x)}\n\n\nclass Learner:\n    def __init__(self, model):\n        self.model = model\n        self.actor_optimizer = torch.optim.Adam(self.model.actor.parameters(), 1e-3)\n        self.critic_optimizer = torch.optim.Adam(self.model.critic.parameters(), 1e-3)\n\n    def update(self, samples):\n        obs = torch.as_tensor(samples["obs"])\n        act = torch.as_tensor(samples["actions"])\n        ret = torch.as_tensor(samples["returns"])\n        out = self.model(obs)\n        log_prob = out["logits"].log_softmax(-1).gather(1, act[:, None]).squeeze(1)\n        a_loss = -(ret * log_prob).mean()\n        c_loss = ((out["values"].squeeze(1) - ret) ** 2).mean()\n        self.critic_optimizer.zero_grad()\n        c_loss.backward(retain_graph=True)\n        self.critic_optimizer.step()\n        self.actor_optimizer.zero_grad()\n        a_loss.backward()\n        self.actor_optimizer.step()\n\n\nlearner = Learner(ActorCritic())\nfor _ in range(2):\n    learner.update({"obs": torch.randn(8, 4), "actions": torch.randint(0, 4, (8,)),\n                    "returns": torch.randn(8)})\n'

_NPG_TWIN = 'import torch\nimport torch.nn as nn\n\n\nclass ActorCritic(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.actor = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))\n        self.critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))\n\n    def forward(self, x):\n        return {"logits": self.actor(x), "values": self.critic(x)}\n\n\nclass Learner:\n    def __init__(self, model):\n        self.model = model\n        self.actor_optimizer = torch.optim.Adam(self.model.actor.parameters(), 1e-3)\n        self.critic_optimizer = torch.optim.Adam(self.model.critic.parameters(), 1e-3)\n\n    def update(self, samples):\n        obs = torch.as_tensor(samples["obs"])\n        act = torch.as_tensor(samples["actions"])\n        ret = torch.as_tensor(samples["returns"])\n        out = self.model(obs)\n        log_prob = out["logits"].log_softmax(-1).gather(1, act[:, None]).squeeze(1)\n        a_loss = -self.model.critic(self.model.actor(obs)).mean()\n        c_loss = ((out["values"].squeeze(1) - ret) ** 2).mean()\n        self.critic_optimizer.zero_grad()\n        c_loss.backward(retain_graph=True)\n        self.critic_optimizer.step()\n        self.actor_optimizer.zero_grad()\n        a_loss.backward()\n        self.actor_optimizer.step()\n\n\nlearner = Learner(ActorCritic())\nfor _ in range(2):\n    learner.update({"obs": torch.randn(8, 4), "actions": torch.randint(0, 4, (8,)),\n                    "returns": torch.randn(8)})\n'


def _gt601(path: Path) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(path)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code == "GT601")


def test_step_between_passes_reached_only_through_an_argument_is_silent(tmp_path: Path) -> None:
    p = tmp_path / "npg.py"
    p.write_text(_NPG)
    assert _gt601(p) == []
    runpy.run_path(str(p), run_name="__main__")


def test_step_between_passes_through_the_stepped_module_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "npg.py"
    p.write_text(_NPG_TWIN)
    assert _gt601(p) == [("GT601", 31)]
    with pytest.raises(RuntimeError, match="inplace operation"):
        runpy.run_path(str(p), run_name="__main__")


# -- GT506 with retain_graph: the step must be shown to update a weight of the carried graph ---
# test-time-adaptation's ASM: `sampling` carries the style encoder's graph from pass to pass,
# `retain_graph=True` keeps it, and the optimizer steps the segmentation model only: the
# old graph's saved weights are never changed, nothing raises. The twin's optimizer also
# steps the encoder ('modified by an inplace operation').

_CARRIED = 'import torch\nimport torch.nn as nn\n\nencoder = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))\nmodel = nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nh = torch.zeros(2, 4)\nfor x in torch.randn(3, 2, 4):\n    h = h + 0.1 * encoder(x)\n    loss = model(h).pow(2).mean()\n    opt.zero_grad()\n    loss.backward(retain_graph=True)\n    opt.step()\n'

_CARRIED_TWIN = 'import torch\nimport torch.nn as nn\n\nencoder = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))\nmodel = nn.Linear(4, 1)\nopt = torch.optim.SGD([*encoder.parameters(), *model.parameters()], lr=0.1)\nh = torch.zeros(2, 4)\nfor x in torch.randn(3, 2, 4):\n    h = h + 0.1 * encoder(x)\n    loss = model(h).pow(2).mean()\n    opt.zero_grad()\n    loss.backward(retain_graph=True)\n    opt.step()\n'


def _gt506(path: Path) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(path)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code == "GT506")


def test_retained_carry_of_a_module_the_step_does_not_update_is_silent(tmp_path: Path) -> None:
    p = tmp_path / "carry.py"
    p.write_text(_CARRIED)
    assert _gt506(p) == []
    runpy.run_path(str(p), run_name="__main__")


def test_retained_carry_of_a_stepped_module_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "carry.py"
    p.write_text(_CARRIED_TWIN)
    assert _gt506(p) == [("GT506", 9)]
    with pytest.raises(RuntimeError, match="inplace operation"):
        runpy.run_path(str(p), run_name="__main__")
