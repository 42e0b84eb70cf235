"""Shapes that fired wrongly on the projects of docs/triage/unseen29b.md (session 29), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Pose2Mesh (demo/run.py): `proj_target, trans = j2d_processing(joints, ...)` before a
    # fitting loop: a NumPy helper of another file; the `d` of `j2d` (a dimension suffix) was
    # read as a discriminator's name. Twin: a real module bound to `d` run before the loop
    "dimension-suffix-is-not-a-discriminator": (Shape("""
        kp3d_scale = lambda a, s: (a * s, s)
        joints = np.ones((4, 2), dtype=np.float32)
        target_np, _ = kp3d_scale(joints, 0.5)
        target = torch.from_numpy(target_np)
        proj = nn.Linear(2, 2)
        opt = torch.optim.SGD(proj.parameters(), lr=0.1)
        for _ in range(3):
            loss = F.l1_loss(proj(torch.ones(4, 2)), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT507"), Shape("""
        d = nn.Linear(2, 2)
        target = d(torch.ones(4, 2))
        proj = nn.Linear(2, 2)
        opt = torch.optim.SGD(proj.parameters(), lr=0.1)
        for _ in range(3):
            loss = F.l1_loss(proj(torch.ones(4, 2)), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT507", line=2, raises=(RuntimeError, "backward through the graph a second"))),
    # pymarl2 (learners/offpg_learner.py): `best_q, ..., best_actions, _ =
    # self.train_critic_best(best_batch)` before the critic's loop; the method runs everything
    # under `no_grad` and returns batch data: no graph, whatever its name says. Twin: the
    # same method without `no_grad`
    "helper-method-spelled-like-a-model-returns-no-graph": (Shape("""
        class Learner:
            def __init__(self):
                self.critic = nn.Linear(3, 1)
                self.target_critic = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.critic.parameters(), lr=0.1)
            def critic_on_best(self, batch):
                with torch.no_grad():
                    q = self.target_critic(batch)
                return q, batch
            def train(self, batch):
                best_q, best_in = self.critic_on_best(batch)
                for t in range(3):
                    loss = (self.critic(best_in) - best_q).pow(2).mean()
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
        Learner().train(torch.randn(5, 3))
        """, "GT507"), Shape("""
        class Learner:
            def __init__(self):
                self.critic = nn.Linear(3, 1)
                self.target_critic = nn.Linear(3, 1)
                self.opt = torch.optim.SGD(self.critic.parameters(), lr=0.1)
            def critic_on_best(self, batch):
                q = self.target_critic(batch)
                return q, batch
            def train(self, batch):
                best_q, best_in = self.critic_on_best(batch)
                for t in range(3):
                    loss = (self.critic(best_in) - best_q).pow(2).mean()
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
        Learner().train(torch.randn(5, 3))
        """, "GT507", line=10, raises=(RuntimeError, "backward through the graph a second"))),
    # FACMAC (learners/facmac_learner_discrete.py): `mask = mask.expand_as(td_error)` after
    # the critic's error: `expand_as` reads the error for its shape only, the mask reused by
    # the actor's loss after the critic's backward holds no graph. Twin: the mask scaled by
    # the error itself
    "mask-expanded-to-the-error-shape": (Shape("""
        critic = nn.Linear(3, 1)
        actor = nn.Linear(3, 3)
        c_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
        a_opt = torch.optim.SGD(actor.parameters(), lr=0.1)
        obs, mask = torch.randn(5, 3), torch.ones(5, 1)
        td_error = critic(obs) - 1.0
        mask = mask.expand_as(td_error)
        loss = (td_error * mask).pow(2).sum() / mask.sum()
        c_opt.zero_grad()
        loss.backward()
        c_opt.step()
        pg_loss = -(critic(actor(obs)) * mask).sum() / mask.sum()
        a_opt.zero_grad()
        pg_loss.backward()
        a_opt.step()
        """, "GT509"), Shape("""
        critic = nn.Linear(3, 1)
        actor = nn.Linear(3, 3)
        c_opt = torch.optim.SGD(critic.parameters(), lr=0.1)
        a_opt = torch.optim.SGD(actor.parameters(), lr=0.1)
        obs, mask = torch.randn(5, 3), torch.ones(5, 1)
        td_error = critic(obs) - 1.0
        mask = mask * td_error
        loss = (td_error * mask).pow(2).sum() / mask.sum()
        c_opt.zero_grad()
        loss.backward()
        c_opt.step()
        pg_loss = -(critic(actor(obs)) * mask).sum() / mask.sum()
        a_opt.zero_grad()
        pg_loss.backward()
        a_opt.step()
        """, "GT509", line=12, raises=(RuntimeError, "backward through the graph a second"))),
    # TranAD (main.py): `l = nn.MSELoss(reduction='mean' if training else 'none')` first, then
    # `if 'DAGMM' in model.name: l = nn.MSELoss(reduction='none')` in an arm whose every path
    # returns; the other models' training backward reads the first `l`. Twin: the arm falls
    # through
    "per-element-criterion-in-an-arm-that-returns": (Shape("""
        def fit(model, data, opt, kind, training=True):
            l = nn.MSELoss(reduction='mean' if training else 'none')
            if kind == "dagmm":
                l = nn.MSELoss(reduction='none')
                return l(model(data), data).detach()
            loss = l(model(data), data)
            if training:
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()
        net = nn.Linear(3, 3)
        fit(net, torch.randn(4, 3), torch.optim.SGD(net.parameters(), lr=0.1), "usad")
        """, "GT510"), Shape("""
        def fit(model, data, opt, kind, training=True):
            l = nn.MSELoss(reduction='mean' if training else 'none')
            if kind == "usad":
                l = nn.MSELoss(reduction='none')
            loss = l(model(data), data)
            if training:
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss
        net = nn.Linear(3, 3)
        fit(net, torch.randn(4, 3), torch.optim.SGD(net.parameters(), lr=0.1), "usad")
        """, "GT510", line=8, raises=(RuntimeError, "grad can be implicitly created"))),
    # TranAD (main.py, OmniAnomaly branch): the same returning arm, read through the rank of
    # `MSE + beta * KLD` with `MSE = l(y_pred, d)`. Twin: the arm falls through
    "per-element-criterion-in-an-arm-that-returns-rank": (Shape("""
        def fit(model, data, opt, kind, training=True):
            l = nn.MSELoss(reduction='mean' if training else 'none')
            if kind == "dagmm":
                l = nn.MSELoss(reduction='none')
                return l(model(data), data).detach()
            for d in data:
                mse = l(model(d), d)
                loss = mse + 0.01 * model.weight.pow(2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()
        net = nn.Linear(3, 3)
        fit(net, torch.randn(4, 3), torch.optim.SGD(net.parameters(), lr=0.1), "omni")
        """, "GT715"), Shape("""
        def fit(model, data, opt, kind, training=True):
            l = nn.MSELoss(reduction='mean' if training else 'none')
            if kind == "omni":
                l = nn.MSELoss(reduction='none')
            for d in data:
                mse = l(model(d), d)
                loss = mse + 0.01 * model.weight.pow(2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()
        net = nn.Linear(3, 3)
        fit(net, torch.randn(4, 3), torch.optim.SGD(net.parameters(), lr=0.1), "omni")
        """, "GT715", line=9, raises=(RuntimeError, "grad can be implicitly created"))),
    # BasicTS (STWave's FeedForward): `x = self.linear[i](x)` / `if i != self.L - 1: x =
    # F.relu(x)` in `for i in range(self.L)`, then `x += inputs` after the loop: the last
    # pass skips the ReLU, the write is into a Linear's output. Twin: the ReLU skipped on the
    # first pass instead: the last output is the ReLU's
    "activation-skipped-on-the-last-pass": (Shape("""
        class FeedForward(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.n = len(sizes) - 1
                self.linear = nn.ModuleList(
                    [nn.Linear(sizes[i], sizes[i + 1]) for i in range(self.n)])
            def forward(self, inputs):
                x = inputs
                for i in range(self.n):
                    x = self.linear[i](x)
                    if i != self.n - 1:
                        x = F.relu(x)
                x += inputs
                return x
        FeedForward([4, 8, 4])(torch.randn(2, 4)).sum().backward()
        """, "GT603"), Shape("""
        class FeedForward(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.n = len(sizes) - 1
                self.linear = nn.ModuleList(
                    [nn.Linear(sizes[i], sizes[i + 1]) for i in range(self.n)])
            def forward(self, inputs):
                x = inputs
                for i in range(self.n):
                    x = self.linear[i](x)
                    if i != 0:
                        x = F.relu(x)
                x += inputs
                return x
        FeedForward([4, 8, 4])(torch.randn(2, 4)).sum().backward()
        """, "GT603", line=13, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
