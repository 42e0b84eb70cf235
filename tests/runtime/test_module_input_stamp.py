"""`gradtrace run` on "backward through the graph a second time" when a discriminator step took
the generator's output without `.detach()` and the discriminator is a model class whose
`forward` runs its layers (NOTE [module input stamp] in `runtime/trace/graph_walk.py`; issue 13
§2, the dcgan injection): GT508 at the call that handed the value in (`netD(fake)`), not at the
layer call inside `forward` (`self.main(input)`) where the graph first consumed it.

Bugs: pytorch/examples' DCGAN shape (a training loop at module level, the fake a local), and a
pix2pix-style method (the fake an attribute set by another method). Left: a fake first consumed
by a plain op before the call (`torch.cat((a, fake))` then `netD(ab)`) keeps that op's line. Look-alikes that train: the same programs with `.detach()` at that call.
Real torch, in-process `gradtrace run`.
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(width, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, input):
        output = self.main(input)
        return output.view(-1)


torch.manual_seed(0)
"""

DCGAN = """
netG, netD = Generator(), Discriminator()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4)
criterion = nn.BCEWithLogitsLoss()
for i in range(2):
    real = torch.randn(5, 6)
    netD.zero_grad()
    errD_real = criterion(netD(real), torch.ones(5))
    errD_real.backward()
    fake = netG(torch.randn(5, 4))
    output = netD(FAKE)  # C
    errD_fake = criterion(output, torch.zeros(5))
    errD_fake.backward()
    optimizerD.step()
    netG.zero_grad()
    errG = criterion(netD(fake), torch.ones(5))
    errG.backward()
    optimizerG.step()
"""

PIX2PIX = """
class Pix2Pix:
    def __init__(self):
        self.netG, self.netD = Generator(), Discriminator()
        self.opt_G = torch.optim.Adam(self.netG.parameters(), lr=2e-4)
        self.opt_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4)

    def backward_D(self, real_a, real_b):
        pred_fake = self.netD(FAKE)  # C
        pred_real = self.netD(real_b)
        self.loss_D = (pred_fake.mean() - pred_real.mean()) * 0.5
        self.loss_D.backward()

    def backward_G(self, real_a, real_b):
        self.loss_G = -self.netD(self.fake_b).mean() + (self.fake_b - real_b).abs().mean()
        self.loss_G.backward()

    def optimize(self, real_a, real_b):
        self.fake_b = self.netG(real_a)
        self.opt_D.zero_grad()
        self.backward_D(real_a, real_b)
        self.opt_D.step()
        self.opt_G.zero_grad()
        self.backward_G(real_a, real_b)
        self.opt_G.step()


model = Pix2Pix()
for i in range(2):
    model.optimize(torch.randn(5, 4), torch.randn(5, 6))
"""

CASES = {"dcgan_loop": (DCGAN, "fake"), "pix2pix_method": (PIX2PIX, "self.fake_b")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_undetached_fake_named_at_the_module_call(run_script, name):
    body, value = CASES[name]
    src = (HEAD + body.replace("FAKE", value)).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 1 and "a second time" in res.err, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT508", line), (first, res.err)


@pytest.mark.parametrize("name", sorted(CASES))
def test_detached_fake_trains_silent(run_script, name):
    body, value = CASES[name]
    res = run_script((HEAD + body.replace("FAKE", value + ".detach()")).lstrip("\n"))
    assert res.code == 0 and res.findings == [], (res.findings, res.err)


def _stamp_of(t):
    from gradtrace.runtime.trace.records import META_CALLED

    got = t.grad_fn.metadata.get(META_CALLED)
    return None if got is None else (got[0].co_name, got[1])


def test_stamp_written_only_for_a_call_in_user_code():
    """The stamp's cost (NOTE [module input stamp]): a layer a library ``Sequential`` calls
    with the value its previous layer made is not stamped; the same hand-over written in user
    code (a loop over a ModuleList) is, with that line; the model's own input keeps the line
    of the user's call."""
    import sys

    import torch
    import torch.nn as nn

    import gradtrace

    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(x)
            return x * 1

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.library = nn.Sequential(nn.Linear(3, 3), Probe())
            self.own = nn.ModuleList([nn.Linear(3, 3), Probe()])

        def forward(self, x):
            y = self.library(x)
            for layer in self.own:
                y = layer(y)
            return y

    net, z = Net(), torch.randn(2, 3, requires_grad=True)
    with gradtrace.trace(every=1):
        h = z * 2
        line = sys._getframe().f_lineno + 1
        net(h)
    loop = Net.forward.__code__.co_firstlineno + 3
    assert _stamp_of(h) == (sys._getframe().f_code.co_name, line)
    assert _stamp_of(seen[0]) is None  # handed over by nn.Sequential.forward
    assert _stamp_of(seen[1]) == ("forward", loop)  # handed over by the user's loop
