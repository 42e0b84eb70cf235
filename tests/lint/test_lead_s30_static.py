"""The lead's static change of session 30: GT220 names the no-grad decorator of a training
object's method that runs the optimized module (NOTE [grad-off method of a trainer]), the
line the fix removes; a `with` block keeps the call inside it (cic's label)."""
from __future__ import annotations

from gradtrace.lint import check_source

SOLVER = '''
import torch
import torch.nn as nn


class Solver:
    def __init__(self):
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
        self.opt = torch.optim.SGD([*self.encoder.parameters(), *self.head.parameters()])

    {deco}
    def prepare(self, x):
        return torch.relu(self.encoder(x))

    def step(self, x, y):
        feats = self.prepare(x)
        self.opt.zero_grad()
        nn.functional.mse_loss(self.head(feats), y).backward()
        self.opt.step()
'''

WITH = '''
import torch
import torch.nn as nn


class Solver:
    def __init__(self):
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 1)
        self.opt = torch.optim.SGD([*self.encoder.parameters(), *self.head.parameters()])

    def step(self, x, y):
        with torch.no_grad():
            feats = self.encoder(x)
        self.opt.zero_grad()
        nn.functional.mse_loss(self.head(feats), y).backward()
        self.opt.step()
'''


def _gt220(src: str) -> list[tuple[int, list[int]]]:
    return [(f.line, [r.line for r in f.related]) for f in check_source(src)
            if f.code == "GT220"]


def test_decorated_method_is_named_at_its_decorator():
    src = SOLVER.replace("{deco}", "@torch.no_grad()")
    assert _gt220(src) == [(12, [14, 10])]


def test_inference_mode_decorator_too():
    src = SOLVER.replace("{deco}", "@torch.inference_mode()")
    assert _gt220(src) == [(12, [14, 10])]


def test_method_with_grad_is_silent():
    assert _gt220(SOLVER.replace("{deco}", "")) == []


def test_with_block_keeps_the_call():
    assert [line for line, _ in _gt220(WITH)] == [14]


# NOTE [shared value holds the loss's own]: one discriminator pass feeds both losses; GT601
# names the step between the backward() calls, not the D call (detaching there would cut the
# generator's loss too). A discriminator loss with its own pass on the fake keeps the D line.
GAN = '''
import torch
import torch.nn as nn

G = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
D = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
bce = nn.BCELoss()
for x in [torch.randn(8, 4)]:
    fake = G(x)
    pred_fake = D(fake)
    loss_g = bce(pred_fake, torch.ones(8, 1))
    loss_d = bce({d_fake}, torch.zeros(8, 1))
    opt_g.zero_grad()
    loss_g.backward(retain_graph=True)
    opt_g.step()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
'''


def _gt601(src: str) -> list[int]:
    return [f.line for f in check_source(src) if f.code == "GT601"]


def test_shared_discriminator_pass_names_the_step():
    assert _gt601(GAN.replace("{d_fake}", "pred_fake")) == [16]


def test_own_discriminator_pass_names_where_the_fake_enters():
    assert _gt601(GAN.replace("{d_fake}", "D(fake)")) == [13]
