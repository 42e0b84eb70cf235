"""Shapes from the projects of docs/triage/unseen49a.md (session 49), each in another
spelling than the project's and next to a buggy twin that is still reported; each runs on
real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

HAND_SGD = '''
class HandSGD:
    def __init__(self, net, lr):
        self.net, self.lr = net, lr
    def step(self):
        for p in self.net.parameters():
            p.data = p.data - self.lr * p.grad.data
            {clear}
def fit(net, batches, opt):
    for x, y in batches:
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
net = nn.Linear(3, 1)
batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
'''

CRITIC = '''
from torch.autograd import grad
def penalty(critic, a, b):
    mix = torch.cat([a, b]).requires_grad_()
    out = critic(mix)
    g = grad(out, mix, grad_outputs=torch.ones_like(out), create_graph=True)[0]
    return ((g.norm(2, dim=1) - 1) ** 2).mean()
class Strategy:
    def __init__(self, net_dis):
        self.net_dis = net_dis
    def train(self, batches):
        enc = nn.Linear(3, 2)
        self.dis = self.net_dis().to("cpu")
        opt_enc = torch.optim.SGD(enc.parameters(), lr=0.1)
        opt_dis = torch.optim.SGD(self.dis.parameters(), lr=0.1)
        for x, u in batches:
            z, zu = enc(x), enc(u)
            opt_enc.zero_grad()
            loss = self.dis(zu).mean() - self.dis(z).mean() + penalty(self.dis, zu, z)
            loss.backward()
            opt_enc.step()
{second}
            dis_loss = self.dis(z).mean() - self.dis(zu).mean() + penalty(self.dis, zu, z)
            opt_dis.zero_grad()
            dis_loss.backward()
            opt_dis.step()
        return self.dis
s = Strategy(lambda: nn.Linear(2, 1))
dis = s.train([(torch.randn(4, 3), torch.randn(4, 3)) for _ in range(2)])
'''

HEAD = '''
class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        self.model.out = nn.Linear(4, 2)
    def freeze_layers(self, n):
        for param in self.model.parameters():
            param.requires_grad = False
{head}
        self.model.out.bias = nn.Parameter(torch.zeros(n))
w = Wrapper()
w.freeze_layers(2)
'''

SEEDED = '''
import numpy as np
class Grower:
    def __init__(self):
        self.model = nn.Conv2d(4, 4, 3, padding=1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
    def seed(self, n):
        return torch.from_numpy(np.ones((n, 4, 5, 5))).float()
    def warm(self, n):
        return self.model(torch.ones(n, 4, 5, 5))
    def train_iter(self, target):
        batch = self.{make}(3)
        with torch.no_grad():
            batch = batch[torch.tensor([2, 0, 1])]
        self.opt.zero_grad()
        loss = F.mse_loss(self.model(batch), target)
        loss.backward()
        self.opt.step()
        return loss
g = Grower()
before = g.model.weight.detach().clone()
g.train_iter(torch.zeros(3, 4, 5, 5))
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # mohbattharani/Hypergradient-Descent: hand-written optimizers (SGD-HD, Adam-HD) whose
    # `step` clears each parameter's `.grad` after using it; `train(model, ..., optimizer)`
    # takes one of them and calls only `optimizer.step()`; GT501 said the gradients are never
    # cleared. Twin: the same optimizer without the clearing (reported; the gradients add up).
    "step-clears-grads": (Shape(HAND_SGD.format(clear="p.grad.zero_()") + """
fit(net, batches, HandSGD(net, 0.1))
""", "GT501", holds="all(float(p.grad.abs().sum()) == 0 for p in net.parameters())"),
        Shape(HAND_SGD.format(clear="pass") + """
fit(net, batches, HandSGD(net, 0.1))
""", "GT501", line=11, holds="all(float(p.grad.abs().sum()) > 0 for p in net.parameters())")),
    # ngnawejonas/deep-active-learning (WAAL): `self.dis = self.net_dis()` builds the critic
    # from a factory stored on the strategy, and the critic's loss is made anew from fresh
    # calls after the first backward; GT509 took the module binding for a graph both passes
    # read. Twin: the critic's loss reuses the encoder's output the first backward freed
    # (reported; raises).
    "module-built-then-called": (Shape(CRITIC.format(second="""
            with torch.no_grad():
                z, zu = enc(x), enc(u)
"""), "GT509"), Shape(CRITIC.format(second=""), "GT509", line=22,
                      raises=(RuntimeError, "backward through the graph a second time"))),
    # mikehuisman/revisiting-learned-optimizers: `freeze_layers` freezes the network, puts a
    # new output layer in place and gives that new layer a fresh zero bias Parameter; GT409
    # said the freeze is undone. Twin: the old (frozen) output layer's bias re-wrapped
    # (reported; that bias trains again beside its frozen weight).
    "head-rebuilt-after-freeze": (Shape(HEAD.format(
        head="        self.model.out = nn.Linear(4, n)"), "GT409",
        holds="w.model.out.weight.requires_grad and not w.model[0].weight.requires_grad"),
        Shape(HEAD.format(head="        pass"), "GT409", line=10,
              holds="w.model.out.bias.requires_grad and not w.model.out.weight.requires_grad")),
    # mravelo5874/neural-cellular-automata (artefact NCA notebook): the seed batch is made by
    # a method that builds it from numpy, then reordered under `no_grad` before the NCA runs
    # on it; GT216 took every `self.method(...)` for a model output. Twin: the batch made by
    # a method that runs the model (reported; the warm-up pass gets no gradient).
    "method-without-graph": (Shape(SEEDED.format(make="seed"), "GT216",
                                   holds="not torch.equal(before, g.model.weight)"),
                             Shape(SEEDED.format(make="warm"), "GT216", line=13,
                                   holds="not torch.equal(before, g.model.weight)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
