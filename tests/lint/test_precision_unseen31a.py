"""Shapes that fired wrongly on the projects of docs/triage/unseen31a.md (session 31: vision
research code), each in another spelling than the project's and next to a buggy twin that is
still reported. The snippets run on real torch."""
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
    # micronet (compression/quantization/wbwtab/quantize.py): `ActivationQuantizer.forward`
    # binarises its input on one arm of `if self.A == 2:` and runs the in-place ReLU on the
    # other: the read of the input on the first arm never follows the ReLU. Twin: the input is
    # read after the `if` (a skip): it is the activated tensor
    "in-place-block-on-the-other-arm-of-a-flag": (Shape("""
        class ActQ(nn.Module):
            def __init__(self, bits=2):
                super().__init__()
                self.bits = bits
                self.act = nn.ReLU(inplace=True)
            def forward(self, x):
                if self.bits == 2:
                    out = torch.sign(x)
                else:
                    out = self.act(x)
                return out
        x = torch.randn(4, 3)
        x0 = x.clone()
        y = ActQ(2)(x)
        """, "GT607", holds="torch.equal(x, x0) and torch.equal(y, torch.sign(x0))"), Shape("""
        class ActQ(nn.Module):
            def __init__(self, bits=2):
                super().__init__()
                self.bits = bits
                self.act = nn.ReLU(inplace=True)
            def forward(self, x):
                if self.bits == 2:
                    out = torch.sign(x)
                else:
                    out = self.act(x)
                return out + x
        x = torch.randn(4, 3)
        x0 = x.clone()
        y = ActQ(3)(x)
        """, "GT607", line=5, holds="torch.equal(y, 2 * torch.relu(x0))")),
    # cassle (methods/byol.py): the groups list `projector` and `predictor`; the momentum
    # projector is run only under `torch.no_grad()` (and read by `momentum_pairs` for the
    # moving average): it gets no gradient, nothing is lost by leaving it out. Twin: the
    # momentum projector runs with grad on: it gets gradients and never moves
    "momentum-part-run-only-without-grad": (Shape("""
        class Byol(nn.Module):
            def __init__(self):
                super().__init__()
                self.projector = nn.Linear(4, 4)
                self.momentum_projector = nn.Linear(4, 4)
                self.predictor = nn.Linear(4, 4)
            @property
            def learnable_params(self):
                return [{"params": self.projector.parameters()},
                        {"params": self.predictor.parameters()}]
            @property
            def momentum_pairs(self):
                return [(self.projector, self.momentum_projector)]
            def step_loss(self, x1, x2):
                p = self.predictor(self.projector(x1))
                with torch.no_grad():
                    z = self.momentum_projector(x2)
                return -(F.normalize(p) * F.normalize(z)).sum()
        m = Byol()
        opt = torch.optim.SGD(m.learnable_params, lr=0.1)
        m.step_loss(torch.randn(3, 4), torch.randn(3, 4)).backward()
        opt.step()
        """, "GT462", holds="m.momentum_projector.weight.grad is None"), Shape("""
        class Byol(nn.Module):
            def __init__(self):
                super().__init__()
                self.projector = nn.Linear(4, 4)
                self.momentum_projector = nn.Linear(4, 4)
                self.predictor = nn.Linear(4, 4)
            @property
            def learnable_params(self):
                return [{"params": self.projector.parameters()},
                        {"params": self.predictor.parameters()}]
            def step_loss(self, x1, x2):
                p = self.predictor(self.projector(x1))
                z = self.momentum_projector(x2)
                return -(F.normalize(p) * F.normalize(z)).sum()
        m = Byol()
        w0 = m.momentum_projector.weight.detach().clone()
        opt = torch.optim.SGD(m.learnable_params, lr=0.1)
        m.step_loss(torch.randn(3, 4), torch.randn(3, 4)).backward()
        opt.step()
        """, "GT462", line=9, holds="m.momentum_projector.weight.grad.abs().sum() > 0 "
           "and torch.equal(m.momentum_projector.weight, w0)")),
    # PoseAug (function_poseaug/model_gan_train.py): the range loss also logs each bone's
    # angle, `acos(clamp((1 - diff.detach())[:, i], -1, 1))`: a detached value, never
    # differentiated. Twin: the same angle, not detached, in the loss: at a cosine of exactly
    # 1 its gradient is infinite
    "arc-cosine-of-a-detached-value-logged": (Shape("""
        def range_loss(diff, log):
            for i in range(diff.shape[1]):
                log[i] = torch.acos(torch.clamp((1 - diff.detach())[:, i], -1, 1)).mean()
            return F.relu(diff.mean(-1) - 0.1).mean()
        d = torch.zeros(3, 2, requires_grad=True)
        range_loss(d, {}).backward()
        """, "GT752", holds="torch.isfinite(d.grad).all()"), Shape("""
        def range_loss(diff, log):
            loss = 0
            for i in range(diff.shape[1]):
                loss = loss + torch.acos(torch.clamp((1 - diff)[:, i], -1, 1)).mean()
            return loss
        d = torch.zeros(3, 2, requires_grad=True)
        range_loss(d, {}).backward()
        """, "GT752", line=4, holds="not torch.isfinite(d.grad).all()")),
    # ReID-Survey (clustercontrast/models/cm.py): in the memory's `forward`, `sim_wise` is
    # built from `self.cam_mem[i].detach().data`, rebound, then `(sim_wise.data + 1) * mask
    # - 1` with `mask` from a method of the class: the `.data` cuts nothing, the value had no
    # history. Twin: the similarity comes from a layer of the module: `.data` cuts it, the
    # layer gets no gradient
    "data-of-a-value-already-detached": (Shape("""
        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.mem = torch.randn(5, 4)
            def masks(self, n):
                return torch.ones(n, 5), torch.zeros(n, 5)
            def forward(self, x):
                f = self.proj(x)
                mask, inst = self.masks(x.shape[0])
                sim = F.softmax(self.mem.mm(self.mem.detach().data.t()), dim=1).detach()
                sim_b = sim[:x.shape[0]]
                sim = F.normalize(sim_b, dim=1).mm(F.normalize(sim, dim=1).t())
                sim = (sim.data + 1) * mask * (1 - inst) - 1
                return (f.mm(self.mem.t()) * torch.gt(sim, 0)).sum()
        m = Memory()
        m(torch.randn(3, 4)).backward()
        """, "GT105", holds="m.proj.weight.grad.abs().sum() > 0"), Shape("""
        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.register_buffer("mem", torch.randn(5, 4))
            def masks(self, n):
                return torch.ones(n, 5), torch.zeros(n, 5)
            def forward(self, x):
                mask, inst = self.masks(x.shape[0])
                sim = self.proj(x).mm(self.mem.t())
                sim = (sim.data + 1) * mask * (1 - inst) - 1
                return sim.sum()
        m = Memory()
        out = m(torch.randn(3, 4))
        """, "GT105", line=11, holds="not out.requires_grad")),
    # PLOP (utils/loss.py, `ExcludedKnowledgeDistillationLoss`): the two distillation terms read
    # buffers made by `torch.zeros(...)` and then filled slice by slice from the logits
    # (`new_inputs[:, 0] = inputs[:, 0]`): the copies keep the graph; the label masks only
    # weight live terms. Twin: the buffer is filled from the teacher's targets only: nothing
    # of the loss reaches the model, the mask is all that is left
    "loss-on-a-buffer-filled-from-the-logits": (Shape("""
        class SplitDistillLoss(nn.Module):
            def __init__(self, reduction='mean', n_old=-1, merge="gt",
                         n_base=-1, temp=1.0):
                super().__init__()
                self.reduction = reduction
                self.n_old = n_old
                self.merge = merge
                self.n_base = n_base
                self.temp = temp
            def forward(self, inputs, targets, labels, mask=None):
                bs, ch_new, w, h = inputs.shape
                device = inputs.device
                temp = torch.ones(bs, self.n_old + 1, w, h).to(device)
                if self.n_old > self.n_base:
                    temp[:, self.n_base:self.n_old] = temp[:, self.n_base:self.n_old] \\
                        / self.temp
                new_inputs = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                new_targets = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                new_inputs[:, 0] = inputs[:, 0]
                new_inputs[:, 1:self.n_old] = inputs[:, 1:self.n_old]
                if self.merge == "gt":
                    new_inputs[:, self.n_old] = inputs[:, self.n_old:].sum(dim=1)
                old_inputs = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                old_targets = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                old_inputs[:, 0] = inputs[:, 0]
                old_inputs[:, 1:self.n_old] = inputs[:, 1:self.n_old]
                if self.merge == "gt":
                    old_inputs[:, self.n_old] = inputs[:, self.n_old:].sum(dim=1)
                loss_new = -(torch.log_softmax(temp * new_inputs, dim=1)
                             * torch.softmax(temp * new_targets, dim=1)).sum(dim=1)
                loss_old = -(torch.log_softmax(temp * old_inputs, dim=1)
                             * torch.softmax(temp * old_targets, dim=1)).sum(dim=1)
                mask_new = labels >= self.n_old
                mask_old = labels < self.n_old
                loss = (mask_new.float() * loss_new) + (mask_old.float() * loss_old)
                if self.reduction == 'mean':
                    return torch.mean(loss)
                return loss
        x = torch.randn(2, 5, 3, 3, requires_grad=True)
        SplitDistillLoss(n_old=3, n_base=1, temp=2.0)(
            x, torch.randn(2, 3, 3, 3), torch.randint(0, 5, (2, 3, 3))).backward()
        """, "GT108", holds="x.grad.abs().sum() > 0"), Shape("""
        class SplitDistillLoss(nn.Module):
            def __init__(self, reduction='mean', n_old=-1, merge="gt",
                         n_base=-1, temp=1.0):
                super().__init__()
                self.reduction = reduction
                self.n_old = n_old
                self.merge = merge
                self.n_base = n_base
                self.temp = temp
            def forward(self, inputs, targets, labels, mask=None):
                bs, ch_new, w, h = inputs.shape
                device = inputs.device
                temp = torch.ones(bs, self.n_old + 1, w, h).to(device)
                if self.n_old > self.n_base:
                    temp[:, self.n_base:self.n_old] = temp[:, self.n_base:self.n_old] \\
                        / self.temp
                new_inputs = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                new_targets = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                new_inputs[:, 0] = targets[:, 0]
                new_inputs[:, 1:self.n_old] = targets[:, 1:self.n_old]
                if self.merge == "gt":
                    new_inputs[:, self.n_old] = targets[:, self.n_old:].sum(dim=1)
                old_inputs = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                old_targets = torch.zeros(bs, self.n_old + 1, w, h).to(device)
                old_inputs[:, 0] = targets[:, 0]
                old_inputs[:, 1:self.n_old] = targets[:, 1:self.n_old]
                if self.merge == "gt":
                    old_inputs[:, self.n_old] = targets[:, self.n_old:].sum(dim=1)
                loss_new = -(torch.log_softmax(temp * new_inputs, dim=1)
                             * torch.softmax(temp * new_targets, dim=1)).sum(dim=1)
                loss_old = -(torch.log_softmax(temp * old_inputs, dim=1)
                             * torch.softmax(temp * old_targets, dim=1)).sum(dim=1)
                mask_new = labels >= self.n_old
                mask_old = labels < self.n_old
                loss = (mask_new.float() * loss_new) + (mask_old.float() * loss_old)
                return torch.mean(loss)
        x = torch.randn(2, 5, 3, 3, requires_grad=True)
        SplitDistillLoss(n_old=3, n_base=1, temp=2.0)(
            x, torch.randn(2, 5, 3, 3), torch.randint(0, 5, (2, 3, 3))).backward()
        """, "GT108", line=33, raises=(RuntimeError, "does not require grad"))),
    # ReID-Survey (clustercontrast/trainers.py): `F.binary_cross_entropy_with_logits(score,
    # pair_labels)` with `pair_labels = (lab == lab.t()).float()[...]`: the comparison builds
    # the target, which never carries a gradient; the term is dead because `score` comes from
    # a helper run under `torch.no_grad()` (GT202 says so), not because of the mask. Twin: the
    # comparison is on the prediction side: the matcher gets no gradient from the term
    "label-mask-as-a-loss-target": (Shape("""
        def matcher_scores(matcher, a):
            with torch.no_grad():
                return matcher(a)
        class Trainer:
            def __init__(self, encoder, matcher, memory_labels):
                self.encoder, self.matcher = encoder, matcher
                self.memory_labels = memory_labels
            def train_step(self, opt, x, labels):
                f = self.encoder(x)
                score = matcher_scores(self.matcher, f)
                lab = torch.cat((labels, self.memory_labels)).unsqueeze(1)
                pair = (lab == lab.t()).float()[:f.shape[0], :2]
                loss = F.mse_loss(f, torch.ones_like(f)) + F.binary_cross_entropy_with_logits(
                    score, pair)
                opt.zero_grad()
                loss.backward()
                opt.step()
        enc, mat = nn.Linear(4, 4), nn.Linear(4, 2)
        opt = torch.optim.SGD([*enc.parameters(), *mat.parameters()], lr=0.1)
        Trainer(enc, mat, torch.tensor([1, 0])).train_step(
            opt, torch.randn(3, 4), torch.tensor([0, 1, 0]))
        """, "GT108", holds="enc.weight.grad.abs().sum() > 0"), Shape("""
        def train_step(encoder, matcher, opt, x, labels):
            f = encoder(x)
            score = matcher(f)
            hard = (score > 0).float()
            loss = F.mse_loss(f, torch.ones_like(f)) + F.binary_cross_entropy_with_logits(
                hard, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        enc, mat = nn.Linear(4, 4), nn.Linear(4, 2)
        opt = torch.optim.SGD([*enc.parameters(), *mat.parameters()], lr=0.1)
        train_step(enc, mat, opt, torch.randn(3, 4), torch.ones(3, 2))
        """, "GT108", line=4, holds="mat.weight.grad is None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
