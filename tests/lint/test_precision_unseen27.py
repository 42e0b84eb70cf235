"""Shapes that fired wrongly on the projects of docs/triage/unseen27.md (session 27), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
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
    # pytorch-domain-adaptation (train_source.py): one epoch helper for training and
    # validation, `if optim is not None:` around its backward/step; the validation call under
    # `torch.no_grad()` passes `optim=None`, so the backward never runs there. Twin: the
    # validation call passes the optimizer: backward raises under no_grad
    "backward-guarded-by-an-optimizer-passed-none": (Shape("""
        def run_epoch(net, batches, opt=None):
            total = 0.0
            for x, y in batches:
                loss = F.mse_loss(net(x), y)
                if opt is not None:
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                total += loss.item()
            return total
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(4, 3), torch.randn(4, 1))]
        run_epoch(net, batches, opt)
        with torch.no_grad():
            run_epoch(net, batches, None)
        """, "GT210"), Shape("""
        def run_epoch(net, batches, opt=None):
            total = 0.0
            for x, y in batches:
                loss = F.mse_loss(net(x), y)
                if opt is not None:
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                total += loss.item()
            return total
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        batches = [(torch.randn(4, 3), torch.randn(4, 1))]
        run_epoch(net, batches, opt)
        with torch.no_grad():
            run_epoch(net, batches, opt)
        """, "GT210", line=15, raises=(RuntimeError, "does not require grad"))),
    # CCT (pseudo_labels/net/resnet50_cam.py): the groups list `backbone` and `newly_added`,
    # and `newly_added = nn.ModuleList([self.classifier])` holds the classifier built just
    # before it: listed through its container. Twin: the container holds another layer, the
    # classifier is in no group and never changes
    "part-held-by-a-listed-container": (Shape("""
        class Cam(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.cls_head = nn.Linear(4, 2)
                self.trunk = nn.ModuleList([self.body])
                self.fresh = nn.ModuleList([self.cls_head])
            def forward(self, x):
                return self.cls_head(self.body(x))
        def make_opt(net):
            return torch.optim.SGD([{"params": net.trunk.parameters(), "lr": 0.01},
                                    {"params": net.fresh.parameters(), "lr": 0.1}])
        net = Cam()
        opt = make_opt(net)
        before = net.cls_head.weight.detach().clone()
        net(torch.randn(3, 4)).sum().backward()
        opt.step()
        """, "GT462", holds="not torch.equal(before, net.cls_head.weight)"), Shape("""
        class Cam(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
                self.cls_head = nn.Linear(4, 2)
                self.trunk = nn.ModuleList([self.body])
                self.fresh = nn.ModuleList([nn.Linear(4, 4)])
            def forward(self, x):
                return self.cls_head(self.body(x))
        def make_opt(net):
            return torch.optim.SGD([{"params": net.trunk.parameters(), "lr": 0.01},
                                    {"params": net.fresh.parameters(), "lr": 0.1}])
        net = Cam()
        opt = make_opt(net)
        before = net.cls_head.weight.detach().clone()
        net(torch.randn(3, 4)).sum().backward()
        opt.step()
        """, "GT462", line=11, holds="torch.equal(before, net.cls_head.weight)")),
    # MP-SENet (train.py): the generator returns several outputs, unpacked (`mag_g, pha_g,
    # com_g = generator(...)`), the models are rebound to DDP wrappers under a setting; the
    # generator's loss also runs the discriminator (the metric term) and the generator steps
    # after it: the discriminator's share of that gradient is cleared on purpose. The reach
    # of the loss lost the unpacked outputs' call. Twin: the generator steps before its
    # backward: it never trains
    "gan-generator-outputs-unpacked": (Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.mag, self.pha = nn.Linear(4, 4), nn.Linear(4, 4)
            def forward(self, x):
                return self.mag(x), self.pha(x)
        gen, disc = Gen(), nn.Linear(4, 1)
        if torch.cuda.device_count() > 1:
            gen, disc = nn.DataParallel(gen), nn.DataParallel(disc)
        opt_g = torch.optim.AdamW(gen.parameters(), 0.01)
        opt_d = torch.optim.AdamW(disc.parameters(), 0.01)
        before = [p.detach().clone() for p in gen.parameters()]
        for x, y in [(torch.randn(8, 4), torch.randn(8, 4))] * 2:
            mag_g, pha_g = gen(x)
            opt_d.zero_grad()
            loss_d = disc(y).sub(1).pow(2).mean() + disc(mag_g.detach()).pow(2).mean()
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = F.mse_loss(mag_g, y) + F.mse_loss(pha_g, y) + disc(mag_g).sub(1).pow(2).mean()
            loss_g.backward()
            opt_g.step()
        """, "GT522", holds="not any(torch.equal(a, b) for a, b in zip(before, gen.parameters()))"), Shape("""
        class Gen(nn.Module):
            def __init__(self):
                super().__init__()
                self.mag, self.pha = nn.Linear(4, 4), nn.Linear(4, 4)
            def forward(self, x):
                return self.mag(x), self.pha(x)
        gen, disc = Gen(), nn.Linear(4, 1)
        if torch.cuda.device_count() > 1:
            gen, disc = nn.DataParallel(gen), nn.DataParallel(disc)
        opt_g = torch.optim.AdamW(gen.parameters(), 0.01)
        opt_d = torch.optim.AdamW(disc.parameters(), 0.01)
        before = [p.detach().clone() for p in gen.parameters()]
        for x, y in [(torch.randn(8, 4), torch.randn(8, 4))] * 2:
            mag_g, pha_g = gen(x)
            opt_d.zero_grad()
            loss_d = disc(y).sub(1).pow(2).mean() + disc(mag_g.detach()).pow(2).mean()
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_g = F.mse_loss(mag_g, y) + F.mse_loss(pha_g, y) + disc(mag_g).sub(1).pow(2).mean()
            opt_g.step()
            loss_g.backward()
        """, "GT522", line=21, holds="all(torch.equal(a, b) for a, b in zip(before, gen.parameters()))")),
    # bet (train.py): a reconstruction error summed over a loader inside `with
    # utils.eval_mode(self.action_ae, self.obs_encoding_net, no_grad=True):`, a class of
    # another file whose `__enter__` enters `torch.no_grad()` when given that switch: no graph
    # is kept. Twin: the same context manager without the switch: every batch's graph stays
    # reachable from the sum
    "loop-under-a-context-manager-switched-to-no-grad": (Shape("""
        class eval_mode:
            def __init__(self, *models, no_grad=False):
                self.models, self.no_grad, self.off = models, no_grad, torch.no_grad()
            def __enter__(self):
                for m in self.models:
                    m.train(False)
                if self.no_grad:
                    self.off.__enter__()
            def __exit__(self, *args):
                if self.no_grad:
                    self.off.__exit__(*args)
                for m in self.models:
                    m.train(True)
                return False
        def reconstruction_error(model, loader):
            total_mse = 0
            with eval_mode(model, no_grad=True):
                for x in loader:
                    total_mse += F.mse_loss(model(x), x, reduction="sum")
            return total_mse
        total = reconstruction_error(nn.Linear(4, 4), [torch.randn(2, 4)] * 3)
        """, "GT505", holds="total.grad_fn is None"), Shape("""
        class eval_mode:
            def __init__(self, *models, no_grad=False):
                self.models, self.no_grad, self.off = models, no_grad, torch.no_grad()
            def __enter__(self):
                for m in self.models:
                    m.train(False)
                if self.no_grad:
                    self.off.__enter__()
            def __exit__(self, *args):
                if self.no_grad:
                    self.off.__exit__(*args)
                for m in self.models:
                    m.train(True)
                return False
        def reconstruction_error(model, loader):
            total_mse = 0
            with eval_mode(model):
                for x in loader:
                    total_mse += F.mse_loss(model(x), x, reduction="sum")
            return total_mse
        total = reconstruction_error(nn.Linear(4, 4), [torch.randn(2, 4)] * 3)
        """, "GT505", line=19, holds="total.grad_fn is not None")),
    # MiniGPT-4 (minigpt4/tasks/base_task.py): one accumulation guard holds two steps, the
    # AMP one (`scaler.step(optimizer)`) and the plain one, after two backwards (`scaler.
    # scale(loss).backward()` else `loss.backward()`): one mistake (the loss is not divided),
    # reported once, not once per step. Look-alike: the loss divided by the count
    "accumulation-guard-with-an-amp-and-a-plain-step": (Shape("""
        def train(net, opt, scaler, loader, accum_iters, use_amp=False):
            for i, (x, y) in enumerate(loader):
                loss = F.mse_loss(net(x), y) / accum_iters
                if use_amp:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()
                if (i + 1) % accum_iters == 0:
                    if use_amp:
                        scaler.step(opt)
                        scaler.update()
                    else:
                        opt.step()
                    opt.zero_grad()
        net = nn.Linear(3, 1, bias=False)
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        g1 = torch.autograd.grad(F.mse_loss(net(x), y), net.weight)[0]
        before = net.weight.detach().clone()
        train(net, opt, torch.amp.GradScaler("cpu", enabled=False), [(x, y)] * 2, 2)
        """, "GT513", holds="torch.allclose(before - net.weight, g1)"), Shape("""
        def train(net, opt, scaler, loader, accum_iters, use_amp=False):
            for i, (x, y) in enumerate(loader):
                loss = F.mse_loss(net(x), y)
                if use_amp:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()
                if (i + 1) % accum_iters == 0:
                    if use_amp:
                        scaler.step(opt)
                        scaler.update()
                    else:
                        opt.step()
                    opt.zero_grad()
        net = nn.Linear(3, 1, bias=False)
        opt = torch.optim.SGD(net.parameters(), lr=1.0)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        g1 = torch.autograd.grad(F.mse_loss(net(x), y), net.weight)[0]
        before = net.weight.detach().clone()
        train(net, opt, torch.amp.GradScaler("cpu", enabled=False), [(x, y)] * 2, 2)
        """, "GT513", line=5, holds="torch.allclose(before - net.weight, 2 * g1)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
