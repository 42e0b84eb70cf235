"""Static facts of session 56 (docs/triage/static56.md): held-out 49's PredRNN (GT115: a
weight's distance from a snapshot is a look, not a use), keras-core (GT302 through a helper that
gives its argument back: NOTE [argument given back]), picotron (GT146: a post-accumulate-grad
hook is given the parameter), GT155 through `loss = out.loss`, GT157 with the caller's backward,
Shift-Net (GT566: NOTE [attribute freed by an earlier method]).
Each buggy snippet was run on torch 2.13 (the crash or the silent symptom its comment names)."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

PRED_BUG = '''\
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux = nn.Linear(4, 1)

    def forward(self, x):
        h = self.body(x)
        scores = [self.aux(h[:, i:i + 1].expand(-1, 4)).mean() for i in range(4)]
        penalty = torch.tensor(scores).sum()
        return h.pow(2).mean() + 0.1 * penalty


model = Tagger()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
w0 = model.aux.weight.detach().clone()
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(3, 4)).backward()
    opt.step()
moved = (model.aux.weight - w0).norm().item()
'''

PRED_OK = '''\
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux = nn.Linear(4, 1)

    def forward(self, x):
        h = self.body(x)
        scores = [self.aux(h[:, i:i + 1].expand(-1, 4)).mean() for i in range(4)]
        penalty = torch.tensor(scores).sum()
        return h.pow(2).mean() + 0.1 * penalty


model = Tagger()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
w0 = model.aux.weight.detach().clone()
for _ in range(2):
    opt.zero_grad()
    model(torch.randn(3, 4)).backward()
    opt.step()
reg = (model.aux.weight - w0).pow(2).sum()
reg.backward()
'''

KERAS_BUG = '''\
import torch
import torch.nn as nn


def as_tensor(x, device=None):
    return torch.as_tensor(x, device=device)


def put_row(table, row, values):
    table = as_tensor(table)
    table[row] = values
    return table


emb = nn.Embedding(5, 3)
opt = torch.optim.SGD(emb.parameters(), lr=0.1)
for step in range(2):
    weights = put_row(emb.weight, 0, torch.zeros(3))
    loss = weights.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

KERAS_OK = '''\
import torch
import torch.nn as nn


def as_tensor(x, device=None):
    return torch.as_tensor(x, device=device)


def put_row(table, row, values):
    table = as_tensor(table).clone()
    table[row] = values
    return table


emb = nn.Embedding(5, 3)
opt = torch.optim.SGD(emb.parameters(), lr=0.1)
for step in range(2):
    weights = put_row(emb.weight, 0, torch.zeros(3))
    loss = weights.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

KERAS_OK2 = '''\
import torch
import torch.nn as nn


def as_tensor(x, device=None):
    return torch.as_tensor(x, dtype=torch.float64)


def put_row(table, row, values):
    table = as_tensor(table)
    table[row] = values
    return table


emb = nn.Embedding(5, 3)
opt = torch.optim.SGD(emb.parameters(), lr=0.1)
for step in range(2):
    weights = put_row(emb.weight, 0, torch.zeros(3))
    loss = weights.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

HOOK_BUG = '''\
import functools

import torch
import torch.nn as nn


def scale(factor, g):
    g.mul_(factor)


model = nn.Linear(3, 1)
for p in model.parameters():
    p.register_post_accumulate_grad_hook(functools.partial(scale, 0.5))
w0 = model.weight.detach().clone()
model(torch.ones(2, 3)).sum().backward()
print(torch.allclose(model.weight, w0 * 0.5))
'''

HOOK_OK = '''\
import torch
import torch.nn as nn

model = nn.Linear(3, 1)
opts = {p: torch.optim.SGD([p], lr=0.1) for p in model.parameters()}


def step_now(p):
    opts[p].step()
    opts[p].zero_grad()


for p in model.parameters():
    p.register_post_accumulate_grad_hook(step_now)
    p.register_hook(lambda g: g.mul_(0.5))
model(torch.ones(2, 3)).sum().backward()
'''

FIELD_BUG = '''\
import torch


class StepOut:
    def __init__(self, loss, logits):
        self.logits = logits
        self.loss = torch.tensor(loss.item())


def step(model, x, y, opt):
    logits = model(x)
    out = StepOut(torch.nn.functional.cross_entropy(logits, y), logits)
    loss = out.loss.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


model = torch.nn.Linear(3, 2)
step(model, torch.randn(4, 3), torch.tensor([0, 1, 0, 1]), torch.optim.SGD(model.parameters(), lr=0.1))
'''

FIELD_OK = '''\
import torch


class StepOut:
    def __init__(self, loss, logits):
        self.logits = logits
        self.loss = loss
        self.value = torch.tensor(loss.item())


def step(model, x, y, opt):
    logits = model(x)
    out = StepOut(torch.nn.functional.cross_entropy(logits, y), logits)
    loss = out.loss.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


model = torch.nn.Linear(3, 2)
step(model, torch.randn(4, 3), torch.tensor([0, 1, 0, 1]), torch.optim.SGD(model.parameters(), lr=0.1))
'''

FUNC_BUG = '''\
import torch
from torch.func import functional_call


class Trainer:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def loss_on(self, x, y):
        weights = dict((n, p.detach().clone()) for n, p in self.net.named_parameters())
        pred = functional_call(self.net, weights, (x,))
        return torch.nn.functional.mse_loss(pred, y)

    def fit(self, x, y):
        self.opt.zero_grad()
        loss = self.loss_on(x, y)
        loss.backward()
        self.opt.step()


Trainer(torch.nn.Linear(3, 1)).fit(torch.randn(4, 3), torch.randn(4, 1))
'''

FUNC_OK = '''\
import torch
from torch.func import functional_call


class Trainer:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def loss_on(self, x, y):
        weights = dict(self.net.named_parameters())
        pred = functional_call(self.net, weights, (x,))
        return torch.nn.functional.mse_loss(pred, y)

    def fit(self, x, y):
        self.opt.zero_grad()
        loss = self.loss_on(x, y)
        loss.backward()
        self.opt.step()


Trainer(torch.nn.Linear(3, 1)).fit(torch.randn(4, 3), torch.randn(4, 1))
'''

FUNC_OK2 = '''\
import torch
from torch.func import functional_call


class Trainer:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def loss_on(self, x, y):
        weights = dict((n, p.detach().clone()) for n, p in self.net.named_parameters())
        pred = functional_call(self.net, weights, (x,))
        return torch.nn.functional.mse_loss(pred, y)

    def fit(self, x, y):
        self.opt.zero_grad()
        loss = self.loss_on(x, y)
        print(loss.item())
        self.opt.step()


Trainer(torch.nn.Linear(3, 1)).fit(torch.randn(4, 3), torch.randn(4, 1))
'''

FREED_BUG = '''\
import torch
import torch.nn as nn


class Agent:
    def __init__(self):
        self.actor = nn.Linear(3, 1)
        self.critic = nn.Linear(4, 1)
        self.a_opt = torch.optim.Adam(self.actor.parameters())
        self.c_opt = torch.optim.Adam(self.critic.parameters())

    def update_critic(self, obs, act, ret):
        self.q = self.critic(torch.cat([obs, act], 1))
        closs = (self.q - ret).pow(2).mean()
        self.c_opt.zero_grad()
        closs.backward()
        self.c_opt.step()

    def update_actor(self, obs):
        aloss = -self.q.mean()
        self.a_opt.zero_grad()
        aloss.backward()
        self.a_opt.step()

    def update(self, obs, act, ret):
        self.update_critic(obs, act, ret)
        self.update_actor(obs)


Agent().update(torch.randn(5, 3), torch.randn(5, 1), torch.randn(5, 1))
'''

FREED_OK = '''\
import torch
import torch.nn as nn


class Agent:
    def __init__(self):
        self.actor = nn.Linear(3, 1)
        self.critic = nn.Linear(4, 1)
        self.a_opt = torch.optim.Adam(self.actor.parameters())
        self.c_opt = torch.optim.Adam(self.critic.parameters())

    def update_critic(self, obs, act, ret):
        self.q = self.critic(torch.cat([obs, act], 1))
        closs = (self.q - ret).pow(2).mean()
        self.c_opt.zero_grad()
        closs.backward()
        self.c_opt.step()

    def update_actor(self, obs):
        aloss = -self.critic(torch.cat([obs, self.actor(obs)], 1)).mean()
        self.a_opt.zero_grad()
        aloss.backward()
        self.a_opt.step()

    def update(self, obs, act, ret):
        self.update_critic(obs, act, ret)
        self.update_actor(obs)


Agent().update(torch.randn(5, 3), torch.randn(5, 1), torch.randn(5, 1))
'''

FREED_OK2 = '''\
import torch
import torch.nn as nn


class Pix2Pix:
    def __init__(self):
        self.net_g = nn.Linear(3, 3)
        self.net_d = nn.Linear(3, 1)
        self.opt_g = torch.optim.Adam(self.net_g.parameters())
        self.opt_d = torch.optim.Adam(self.net_d.parameters())

    def forward(self, a):
        self.fake_b = self.net_g(a)

    def backward_d(self, b):
        self.loss_d = self.net_d(self.fake_b.detach()).mean() - self.net_d(b).mean()
        self.loss_d.backward()

    def backward_g(self, b):
        self.loss_g = -self.net_d(self.fake_b).mean() + (self.fake_b - b).abs().mean()
        self.loss_g.backward()

    def optimize(self, a, b):
        self.forward(a)
        self.opt_d.zero_grad()
        self.backward_d(b)
        self.opt_d.step()
        self.opt_g.zero_grad()
        self.backward_g(b)
        self.opt_g.step()


Pix2Pix().optimize(torch.randn(4, 3), torch.randn(4, 3))
'''

CASES = [
    # (source, code, expected lines)
    (PRED_BUG, "GT115", [14]),    # `(m.aux.weight - w0).norm()` only measures it
    (PRED_OK, "GT115", []),       # a regulariser on the same difference trains it elsewhere
    (KERAS_BUG, "GT302", [11]),   # `table = as_tensor(table)` gives the Parameter back
    (KERAS_OK, "GT302", []),      # `.clone()` first
    (KERAS_OK2, "GT302", []),     # converted to float64: a copy
    (HOOK_BUG, "GT146", [8]),     # a partial registered as a post-accumulate hook
    (HOOK_OK, "GT146", []),       # optimizer-in-backward; a tensor hook given the gradient
    (FIELD_BUG, "GT155", [7]),    # `loss = out.loss.mean()`, then `loss.backward()`
    (FIELD_OK, "GT155", []),
    (FUNC_BUG, "GT157", [11]),    # `fit` backpropagates what `loss_on` returns
    (FUNC_OK, "GT157", []),
    (FUNC_OK2, "GT157", []),      # nobody backpropagates it
    (FREED_BUG, "GT566", [20]),   # the actor's loss reads the critic's freed `self.q`
    (FREED_OK, "GT566", []),      # the actor runs the critic again
    (FREED_OK2, "GT566", []),     # pix2pix: D reads `self.fake_b.detach()`, G the live one
]


@pytest.mark.parametrize("src,code,lines", CASES, ids=[
    "pred", "pred-ok", "keras", "keras-ok", "keras-ok2", "hook", "hook-ok", "field", "field-ok",
    "func", "func-ok", "func-ok2", "freed", "freed-ok", "freed-ok2"])
def test_static56(src: str, code: str, lines: list[int]) -> None:
    assert [f.line for f in check_source(src, select=[code]) if f.code == code] == lines
