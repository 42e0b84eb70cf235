"""Session 55, helper "static55a" (docs/triage/static55a.md): facts that cross a file or a
call, each with a buggy twin in another style than its probe and a silent look-alike,
in-process (``check_paths`` on a folder of files written to ``tmp_path``; nothing imported)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings


def _src(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _found(src: str, *codes: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(_src(src), "m.py") if f.code in codes)


def _project(tmp_path, files: dict[str, str], *codes: str) -> list[tuple[str, str, int]]:
    for name, text in files.items():
        (tmp_path / name).write_text(_src(text))
    found = check_paths([str(tmp_path)], Settings()).findings
    return sorted((f.path.rpartition("/")[2], f.code, f.line) for f in found if f.code in codes)


# -- 1. a parameter's class from its callers, across files (probe m2) ------------------------
# NOTE [handed class across files]: `run(model, ...)` in a torch-less file, handed a `Net` by
# another file; the method it runs is that class's (torch 2.13: backward raises "element 0 of
# tensors does not require grad")
NET = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def compute_loss(self, x, y):
        {body}
"""
TRAINER = """
def run(model, batches, opt):
    for xb, yb in batches:
        loss = model.compute_loss(xb, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
MAIN = """
import torch
from model import Net
from trainer import run

net = Net()
run(net, [(torch.randn(4, 3), torch.randn(4, 1))] * 2, torch.optim.SGD(net.parameters(), lr=0.1))
"""


@pytest.mark.parametrize("body,expected", [
    ("with torch.inference_mode():\n            return F.mse_loss(self.fc(x), y)",
     [("trainer.py", "GT202", 3)]),
    # look-alike: only the accuracy is made under inference_mode
    ("with torch.inference_mode():\n            acc = (self.fc(x) > 0).float().mean()\n"
     "        return F.mse_loss(self.fc(x), y) + 0 * acc", []),
])
def test_method_of_a_class_handed_by_another_file(tmp_path, body, expected) -> None:
    files = {"model.py": NET.format(body=body), "trainer.py": TRAINER, "main.py": MAIN}
    assert _project(tmp_path, files, "GT202") == expected


# -- 2. an optimizer over what a holder's class freezes (probe m6: EMA teacher) ---------------
# NOTE [frozen by its holder]; torch 2.13: the student never moves (Adam steps frozen weights)
DISTILLER = """
import torch.nn as nn


class Distiller:
    def __init__(self, dim):
        self.teacher = nn.Linear(dim, 2)
        self.teacher.eval().requires_grad_(False)
        self.student = nn.Linear(dim, 2)

    def loss(self, x):
        return (self.student(x) - self.teacher(x)).pow(2).mean()
{more}
"""
DISTILL = """
import torch
from models import Distiller

d = Distiller(4)
opt = torch.optim.Adam(list(d.{part}.parameters()), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    d.loss(torch.randn(8, 4)).backward()
    opt.step()
"""


@pytest.mark.parametrize("part,more,expected", [
    ("teacher", "", [("train.py", "GT494", 5)]),
    ("student", "", []),  # look-alike: the trained module
    # look-alike: the class can unfreeze it (a later stage trains the teacher)
    ("teacher", "\n    def unfreeze(self):\n        self.teacher.requires_grad_(True)\n", []),
])
def test_optimizer_over_what_the_holder_froze(tmp_path, part, more, expected) -> None:
    files = {"models.py": DISTILLER.format(more=more), "train.py": DISTILL.format(part=part)}
    assert _project(tmp_path, files, "GT494") == expected


# -- 3. GAN losses built by helpers (probe m7): GT508 at the discriminator's `D(fake)` --------
# NOTE [GAN losses in helpers]; torch 2.13: "Trying to backward through the graph a second time"
GAN = """
import torch
import torch.nn as nn

crit = nn.BCEWithLogitsLoss()


def d_loss_fn(netD, x_real, x_fake):
    ones, zeros = torch.ones(x_real.size(0), 1), torch.zeros(x_fake.size(0), 1)
    return crit(netD(x_real), ones) + crit(netD({fake}), zeros)


def g_loss_fn(netD, x_fake):
    return crit(netD(x_fake), torch.ones(x_fake.size(0), 1))


netG, netD = nn.Linear(2, 3), nn.Linear(3, 1)
opt_g = torch.optim.SGD(netG.parameters(), lr=0.1)
opt_d = torch.optim.SGD(netD.parameters(), lr=0.1)
for real in [torch.randn(5, 3)] * 2:
    fake = netG(torch.randn(5, 2))
    opt_g.zero_grad()
    g_loss_fn(netD, fake).backward()
    opt_g.step()
    opt_d.zero_grad()
    d_loss_fn(netD, real, fake).backward()
    opt_d.step()
"""


@pytest.mark.parametrize("fake,expected", [
    ("x_fake", [("GT508", 9)]),        # the generator step first, helpers of the file
    ("x_fake.detach()", []),           # look-alike: detached in the discriminator loss
])
def test_gan_losses_in_helpers(fake, expected) -> None:
    assert _found(GAN.format(fake=fake), "GT508", "GT509") == expected


LOSSES = """
import torch
import torch.nn.functional as F


def discriminator_loss(D, real, fake):
    real_logits = D(real)
    fake_logits = D({fake})
    return (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
            + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))


def generator_loss(D, fake):
    return F.binary_cross_entropy_with_logits(D(fake), torch.ones_like(D(fake)))
"""
GAN_TRAIN = """
import torch
import torch.nn as nn
from losses import discriminator_loss, generator_loss

G, D = nn.Linear(8, 4), nn.Linear(4, 1)
opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
for step in range(2):
    real = torch.randn(8, 4)
    fake = G(torch.randn(8, 8))
    opt_d.zero_grad()
    discriminator_loss(D, real, fake).backward()
    opt_d.step()
    opt_g.zero_grad()
    generator_loss(D, fake).backward()
    opt_g.step()
"""


@pytest.mark.parametrize("fake,expected", [
    ("fake", [("train.py", "GT508", 12)]),  # at the call, naming losses.py:7
    ("fake.detach()", []),
])
def test_gan_losses_in_another_file(tmp_path, fake, expected) -> None:
    files = {"losses.py": LOSSES.format(fake=fake), "train.py": GAN_TRAIN}
    assert _project(tmp_path, files, "GT508", "GT509") == expected
