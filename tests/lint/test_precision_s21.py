"""Shapes that fired wrongly on the projects of docs/triage/unseen21.md (session 21), each in
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
    # pytorch-nested-unet (train.py): the scheduler is built and stepped under `if
    # config['scheduler'] == 'CosineAnnealingLR':` / `elif ... == 'ReduceLROnPlateau':`, the
    # plateau arm with the metric: a setting read from a dict by a constant key. Here other
    # names and constants. Twin: the bare `step()` sits under the plateau's own constant
    "plateau-and-epoch-scheduler-under-a-dict-setting": (Shape("""
        def fit(opts, model):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            if opts["lr_policy"] == "cos":
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
            elif opts["lr_policy"] == "plateau":
                sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
            for epoch in range(3):
                opt.zero_grad()
                model(torch.randn(4, 3)).pow(2).mean().backward()
                opt.step()
                if opts["lr_policy"] == "cos":
                    sched.step()
                elif opts["lr_policy"] == "plateau":
                    sched.step(1.0)
            return opt.param_groups[0]["lr"]
        lrs = [fit({"lr_policy": p}, nn.Linear(3, 1)) for p in ("cos", "plateau")]
        """, "GT531", holds="lrs[0] < 0.1 and lrs[1] < 0.1"), Shape("""
        def fit(opts, model):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            if opts["lr_policy"] == "cos":
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
            elif opts["lr_policy"] == "plateau":
                sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
            for epoch in range(3):
                opt.zero_grad()
                model(torch.randn(4, 3)).pow(2).mean().backward()
                opt.step()
                if opts["lr_policy"] == "plateau":
                    sched.step()
            return opt.param_groups[0]["lr"]
        fit({"lr_policy": "plateau"}, nn.Linear(3, 1))
        """, "GT531", line=12, raises=(TypeError, "metrics"))),
    # denoising-diffusion-gan (train_ddgan.py): the critic's loss on real data is backwarded
    # with `retain_graph=True` (for the R1 penalty), the critic steps, then the generator's
    # loss runs the critic again on new samples (`netD(x_pos, t, ...)`, `t =
    # torch.randint(..., device=device)`, the real batch re-read): the model itself, a
    # setting by keyword and data are read again, no value of the kept graph. Twin: the
    # generator's loss also reads the critic's old score on the real batch
    "critic-run-again-after-its-step": (Shape("""
        def train(args):
            device = torch.device(args["dev"])
            batches = [torch.randn(8, 4) for _ in range(args["n"])]
            G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
            D = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
            D = D.to(device)
            opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
            opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
            for x in batches:
                D.zero_grad()
                real = x.to(device)
                real.requires_grad = True
                t = torch.randint(0, 4, (real.size(0), 1), device=device).float()
                d_real = D(torch.cat([real, t], 1))
                F.softplus(-d_real).mean().backward(retain_graph=True)
                grad = torch.autograd.grad(d_real.sum(), real, create_graph=True)[0]
                grad.pow(2).sum(1).mean().backward()
                fake = G(torch.randn(8, 4, device=device))
                F.softplus(D(torch.cat([fake.detach(), t], 1))).mean().backward()
                opt_d.step()
                G.zero_grad()
                t = torch.randint(0, 4, (real.size(0), 1), device=device).float()
                fake = G(real + torch.randn(8, 4, device=device))
                err_g = F.softplus(-D(torch.cat([fake, t], 1))).mean()
                err_g.backward()
                opt_g.step()
            return err_g.item()
        out = train({"dev": "cpu", "n": 3})
        """, "GT601", holds="out == out"), Shape("""
        def train(args):
            device = torch.device(args["dev"])
            batches = [torch.randn(8, 4) for _ in range(args["n"])]
            G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
            D = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
            D = D.to(device)
            opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
            opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
            for x in batches:
                D.zero_grad()
                real = x.to(device)
                t = torch.randint(0, 4, (real.size(0), 1), device=device).float()
                d_real = D(torch.cat([real, t], 1))
                F.softplus(-d_real).mean().backward(retain_graph=True)
                fake = G(torch.randn(8, 4, device=device))
                F.softplus(D(torch.cat([fake.detach(), t], 1))).mean().backward()
                opt_d.step()
                G.zero_grad()
                fake = G(real + torch.randn(8, 4, device=device))
                err_g = F.softplus(-D(torch.cat([fake, t], 1))).mean() + 0.1 * d_real.mean()
                err_g.backward()
                opt_g.step()
            return err_g.item()
        train({"dev": "cpu", "n": 3})
        """, "GT601", line=20, raises=(RuntimeError, "modified by an inplace operation"))),
    # mammoth (lora_prototype_utils/tuners/*_tuner.py): `fisher_loss_v2` backwards each
    # layer's `(reg - dp).backward()` itself and adds `.detach()`ed copies into running
    # totals it returns for logging; `compute_fisher_loss` hands them on. A helper that runs
    # backward (on any receiver, here a difference) is not a loss-cutting helper. Twin: the
    # helper backwards nothing and the caller backwards the detached total
    "helper-backwards-a-difference-and-returns-detached-totals": (Shape("""
        class Anchored(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)
            def anchor_terms(self, anchor, train):
                pull_sum, push_sum = torch.zeros(1), torch.zeros(1)
                for layer in (self.a, self.b):
                    pull = (layer.weight - anchor).pow(2).sum()
                    push = 0.01 * layer.weight.abs().sum()
                    with torch.no_grad():
                        pull_sum += pull.detach()
                        push_sum += push.detach()
                    if train:
                        (pull - push).backward()
                return pull_sum, push_sum
            def anchor_loss(self, anchor, train):
                pull_sum, push_sum = self.anchor_terms(anchor, train)
                return pull_sum, push_sum
        m = Anchored()
        logged = m.anchor_loss(torch.zeros(3, 3), True)
        """, "GT107", holds="m.a.weight.grad is not None and logged[0].item() > 0"), Shape("""
        class Anchored(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)
            def anchor_terms(self, anchor):
                pull_sum = torch.zeros(1)
                for layer in (self.a, self.b):
                    pull = (layer.weight - anchor).pow(2).sum()
                    pull_sum = pull_sum + pull.detach()
                return pull_sum
            def anchor_loss(self, anchor):
                return self.anchor_terms(anchor)
        m = Anchored()
        m.anchor_loss(torch.zeros(3, 3)).backward()
        """, "GT107", line=9, raises=(RuntimeError, "does not require grad"))),
    # msn (src/msn_train.py): `prototypes = nn.Parameter(prototypes).to(device)` inside `with
    # torch.no_grad():`, then `prototypes.requires_grad = True` and the optimizer gets it:
    # made with grad off, the copy is a leaf. Here a cast, `requires_grad_()`. Twin: the same
    # copy outside `no_grad` is a non-leaf and turning its flag on raises
    "parameter-copied-under-no-grad-then-made-trainable": (Shape("""
        def make_centroids(k, dim, dtype):
            with torch.no_grad():
                c = torch.empty(k, dim)
                nn.init.normal_(c)
                c = nn.Parameter(c).to(dtype)
            c.requires_grad_()
            return c
        cent = make_centroids(4, 3, torch.float64)
        opt = torch.optim.SGD([cent], lr=0.1)
        (cent ** 2).sum().backward()
        opt.step()
        """, "GT403", holds="cent.is_leaf and cent.grad is not None"), Shape("""
        def make_centroids(k, dim, dtype):
            c = torch.empty(k, dim)
            nn.init.normal_(c)
            c = nn.Parameter(c).to(dtype)
            c.requires_grad = True
            return c
        make_centroids(4, 3, torch.float64)
        """, "GT403", line=4, raises=(RuntimeError, "only change requires_grad flags of leaf"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
