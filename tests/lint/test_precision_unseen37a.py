"""Shapes that fired wrongly on the projects of docs/triage/unseen37a.md (session 37: vision,
generative, graph and physics research code), each in another spelling than the project's and
next to a buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # rq-vae-transformer (`trainer_rqvae.py`, VQGAN's adaptive weight): two gradients without
    # a graph make a ratio, and the name is then rebound to `torch.clamp(ratio, 0, 1e4).detach()`:
    # a coefficient cut on purpose, not a penalty (NOTE [penalty name rebound]). Twin: a
    # gradient penalty whose name is rebound by more penalty arithmetic, backpropagated alone:
    # it has no graph ('does not require grad')
    "adaptive-weight-rebound-to-a-detached-clamp": (Shape("""
        def adaptive_weight(rec_loss, gan_loss, last_layer):
            rec_grads = torch.autograd.grad(rec_loss, last_layer, retain_graph=True)[0]
            gan_grads = torch.autograd.grad(gan_loss, last_layer, retain_graph=True)[0]
            weight = torch.norm(rec_grads) / (torch.norm(gan_grads) + 1e-4)
            weight = torch.clamp(weight, 0.0, 1e4).detach()
            return weight
        dec, head = nn.Linear(4, 4), nn.Linear(4, 1)
        opt = torch.optim.SGD(dec.parameters(), lr=0.1)
        for x in torch.randn(2, 8, 4):
            out = dec(x)
            rec = ((out - x) ** 2).mean()
            gan = -head(out).mean()
            loss = rec + adaptive_weight(rec, gan, dec.weight) * gan
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT206", holds="dec.weight.grad is not None"), Shape("""
        def grad_penalty(critic, mix):
            grads = torch.autograd.grad(critic(mix).sum(), mix, retain_graph=True)[0]
            gp = grads.flatten(1).norm(2, dim=1)
            gp = ((gp - 1) ** 2).mean()
            return gp
        critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = torch.optim.SGD(critic.parameters(), lr=0.1)
        for real in torch.randn(2, 8, 4):
            mix = (real * 0.5).requires_grad_(True)
            penalty = grad_penalty(critic, mix)
            opt.zero_grad()
            penalty.backward()
            opt.step()
        """, "GT206", line=2, raises=(RuntimeError, "does not require grad"))),
    # graphSAGE-pytorch (`models.py`, the unsupervised loss): `neg = cosine_similarity(...)`
    # then `torch.log(torch.sigmoid(-neg))`: a negated cosine lies in [-1, 1], the sigmoid in
    # [0.27, 0.74], the log is finite. Twin: raw dot products of embeddings far apart: the
    # sigmoid rounds to 0 and the gradient is NaN
    "log-sigmoid-of-a-negated-cosine": (Shape("""
        emb = nn.Embedding(6, 4)
        with torch.no_grad():
            emb.weight.mul_(40.0)
        opt = torch.optim.SGD(emb.parameters(), lr=0.1)
        nodes, negatives = torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5])
        def unsup_loss(e):
            neg = F.cosine_similarity(e[nodes], e[negatives])
            neg = torch.mean(torch.log(torch.sigmoid(-neg)), 0)
            return -neg
        loss = unsup_loss(emb.weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT756", holds="torch.isfinite(emb.weight).all()"), Shape("""
        emb = nn.Embedding(6, 4)
        with torch.no_grad():
            emb.weight.copy_(torch.tensor([[9.0] * 4] * 3 + [[-9.0] * 4] * 3))
        opt = torch.optim.SGD(emb.parameters(), lr=0.1)
        nodes, negatives = torch.tensor([0, 1, 2]), torch.tensor([3, 4, 5])
        def unsup_loss(e):
            neg = (e[nodes] * e[negatives]).sum(-1) * 0.3
            neg = torch.mean(torch.log(torch.sigmoid(neg)), 0)
            return -neg
        loss = unsup_loss(emb.weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """, "GT756", line=8, holds="torch.isnan(emb.weight).any()")),
    # DiffCoSim (`trainer_throwing.py`): `if hparams.task == "hit": self.initial_velocity =
    # nn.Parameter(...)` in `__init__` (which stores `self.hparams = hparams`), and `if
    # self.hparams.task == "vertical_nospin": self.initial_velocity = torch.cat(...)` in a
    # method: one task, fixed at build, never both (NOTE [setting fixed at build]). Twin: the
    # method's test is the negation: the "hit" instance assigns a tensor over its Parameter
    "parameter-and-plain-value-under-two-tasks": (Shape("""
        class Thrower(nn.Module):
            def __init__(self, hparams):
                super().__init__()
                self.register_buffer("vxvy", torch.tensor([1.0, 2.0]))
                self.spin = nn.Parameter(torch.zeros(1))
                if hparams.task == "hit":
                    self.velocity = nn.Parameter(torch.zeros(3))
                self.hparams = hparams
            def forward(self, x):
                if self.hparams.task == "vertical":
                    self.velocity = torch.cat([self.vxvy, self.spin])
                return x * self.velocity.sum()
        class Args:
            task = "vertical"
        m = Thrower(Args())
        m(torch.ones(2)).sum().backward()
        """, "GT415", holds="m.spin.grad is not None"), Shape("""
        class Thrower(nn.Module):
            def __init__(self, hparams):
                super().__init__()
                self.register_buffer("vxvy", torch.tensor([1.0, 2.0]))
                self.spin = nn.Parameter(torch.zeros(1))
                if hparams.task == "hit":
                    self.velocity = nn.Parameter(torch.zeros(3))
                self.hparams = hparams
            def forward(self, x):
                if self.hparams.task != "vertical":
                    self.velocity = torch.cat([self.vxvy, self.spin])
                return x * self.velocity.sum()
        class Args:
            task = "hit"
        m = Thrower(Args())
        m(torch.ones(2)).sum().backward()
        """, "GT415", line=11, raises=(TypeError, "cannot assign"))),
    # StackGAN-Pytorch (`trainer.py`): `netG, netD = self.load_network_stageI()`, a method
    # that calls `netD.apply(weights_init)` and `netD.cuda()`; the generator's output is made
    # before the discriminator's step, its loss through `netD` after it. Those calls run no
    # forward: nothing built before the step saved the discriminator's weights. Twin: the
    # generator's loss through `netD` is built before the discriminator's step
    "model-set-up-by-a-loader-method-then-stepped": (Shape("""
        def init_weights(m):
            if isinstance(m, nn.Linear):
                m.weight.data.normal_(0.0, 0.2)
        def run(net, x):
            return net(x)
        class Trainer:
            def load_networks(self):
                netG = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
                netG.apply(init_weights)
                netD = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                netD.apply(init_weights)
                netD.to("cpu")
                return netG, netD
            def train(self, loader):
                netG, netD = self.load_networks()
                optimizerD = torch.optim.Adam(netD.parameters())
                optimizerG = torch.optim.Adam(netG.parameters())
                for real, noise in loader:
                    fake = run(netG, noise)
                    optimizerD.zero_grad()
                    errD = netD(fake.detach()).mean() - netD(real).mean()
                    errD.backward()
                    optimizerD.step()
                    optimizerG.zero_grad()
                    errG = -netD(fake).mean()
                    errG.backward()
                    optimizerG.step()
                return netG
        g = Trainer().train(list(zip(torch.randn(2, 8, 4), torch.randn(2, 8, 4))))
        """, "GT609", holds="g[0].weight.grad is not None"), Shape("""
        def init_weights(m):
            if isinstance(m, nn.Linear):
                m.weight.data.normal_(0.0, 0.2)
        def run(net, x):
            return net(x)
        class Trainer:
            def load_networks(self):
                netG = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
                netG.apply(init_weights)
                netD = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
                netD.apply(init_weights)
                netD.to("cpu")
                return netG, netD
            def train(self, loader):
                netG, netD = self.load_networks()
                optimizerD = torch.optim.Adam(netD.parameters())
                optimizerG = torch.optim.Adam(netG.parameters())
                for real, noise in loader:
                    fake = run(netG, noise)
                    optimizerD.zero_grad()
                    errD = netD(fake.detach()).mean() - netD(real).mean()
                    errG = -run(netD, fake).mean()
                    errD.backward()
                    optimizerD.step()
                    optimizerG.zero_grad()
                    errG.backward()
                    optimizerG.step()
                return netG
        g = Trainer().train(list(zip(torch.randn(2, 8, 4), torch.randn(2, 8, 4))))
        """, "GT609", line=24, raises=(RuntimeError, "modified by an inplace operation"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# RAD-NeRF (`nerf/utils.py`): `linear_to_srgb(x)` = `torch.where(x < 0.0031308, 12.92 * x,
# 1.055 * x ** 0.41666 - 0.055)`, called only by the test and GUI renderers under
# `torch.no_grad()`: no gradient is ever taken of it (NOTE [grad off by the callers], which
# needs a project of two files at least: files on disk). Twin: the training loss compares the curve of
# the prediction: NaN gradients where the prediction is <= 0.
SRGB = '''
import torch
import torch.nn as nn


def linear_to_srgb(x):
    return torch.where(x < 0.0031308, 12.92 * x, 1.055 * x ** 0.41666 - 0.055)


def render(model, rays):
    with torch.no_grad():
        return linear_to_srgb(model(rays))


torch.manual_seed(0)
model = nn.Linear(3, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for rays in torch.randn(2, 8, 3):
    loss = ((TARGET(model(rays)) - rays.abs()) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
img = render(model, torch.randn(8, 3))
assert torch.isfinite(model.weight).all()
'''


def _codes(path, code: str) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path)], Settings()).findings if f.code == code]


def test_srgb_curve_applied_only_at_test_time_is_silent(tmp_path) -> None:
    import runpy
    path = tmp_path / "render.py"
    path.write_text(SRGB.lstrip("\n").replace("TARGET", ""))
    (tmp_path / "settings.py").write_text("LR = 0.1\n")
    assert _codes(path, "GT751") == []
    runpy.run_path(str(path))


def test_srgb_curve_in_the_training_loss_is_reported(tmp_path) -> None:
    import runpy
    path = tmp_path / "render.py"
    path.write_text(SRGB.lstrip("\n").replace("TARGET", "linear_to_srgb"))
    (tmp_path / "settings.py").write_text("LR = 0.1\n")
    assert _codes(path, "GT751") == [6]
    with pytest.raises(AssertionError):
        runpy.run_path(str(path))
