"""Shapes that fired wrongly on the projects of docs/triage/unseen.md, session 9 (continual
learning, adversarial attacks, distillation, source separation, normalizing flows, SAC,
time series, transfer learning), each in another spelling than the project's and next to a
buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""
ELEMENT0 = (RuntimeError, "does not require grad")
LEAF_FLAG = (RuntimeError, "only change requires_grad flags of leaf variables")
INPLACE = (RuntimeError, "modified by an inplace operation")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # glow: `encode_dataset` appends model outputs; it is only reached from a
    # `@torch.no_grad()` function, through another helper (grad is off two calls down)
    "outputs-collected-two-calls-below-no-grad": (Shape("""
        def collect_codes(net, batches):
            codes = []
            for xb in batches:
                codes.append(net(xb))
            return torch.cat(codes)
        def codes_report(net, batches):
            return collect_codes(net, batches).mean(0)
        @torch.inference_mode()
        def plot_latents(net, batches):
            return codes_report(net, batches)
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        out = plot_latents(net, [torch.randn(3, 4) for _ in range(4)])
        """, "GT505", holds="out.grad_fn is None"), Shape("""
        def collect_codes(net, batches):
            codes = []
            for xb in batches:
                codes.append(net(xb))
            return torch.cat(codes)
        def codes_report(net, batches):
            return collect_codes(net, batches).mean(0)
        def plot_latents(net, batches):
            return codes_report(net, batches)
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        out = plot_latents(net, [torch.randn(3, 4) for _ in range(4)])
        """, "GT505", 4, holds="out.grad_fn is not None")),
    # demucs: `with torch.no_grad(): self._run_one_epoch(epoch, train=False)` where the
    # backward sits under `if train:`; here positionally, under `if not evaluate`
    "gradient-arm-switched-off-by-a-constant-argument": (Shape("""
        def run_pass(net, xb, yb, opt, evaluate=False):
            out = net(xb)
            loss = F.mse_loss(out, yb)
            if not evaluate:
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), 0.1)
        xb, yb = torch.randn(4, 3), torch.randn(4, 1)
        run_pass(net, xb, yb, opt)
        with torch.no_grad():
            val = run_pass(net, xb, yb, None, True)
        """, "GT210"), Shape("""
        def run_pass(net, xb, yb, opt, evaluate=False):
            out = net(xb)
            loss = F.mse_loss(out, yb)
            if not evaluate:
                opt.zero_grad()
                loss.backward()
                opt.step()
            return loss.item()
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), 0.1)
        xb, yb = torch.randn(4, 3), torch.randn(4, 1)
        with torch.no_grad():
            val = run_pass(net, xb, yb, opt, False)
        """, "GT210", 12, ELEMENT0)),
    # Time-Series-Library: a plain list of moving-average blocks that store their kernel size
    # (a number: used in arithmetic and handed to `nn.AvgPool1d`) and own no parameter or
    # buffer; the list hides nothing from `parameters()`, `state_dict()` or `.to()`
    "list-of-parameter-free-blocks-storing-a-size": (Shape("""
        class Smoother(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.width = width
                self.pool = nn.MaxPool1d(width, stride=1)
            def forward(self, x):
                pad = x[..., :1].expand(*x.shape[:-1], self.width - 1)
                return self.pool(torch.cat([pad, x], -1))
        class MultiSmooth(nn.Module):
            def __init__(self, widths):
                super().__init__()
                self.smoothers = [Smoother(w) for w in widths]
                self.head = nn.Linear(8, 1)
            def forward(self, x):
                return self.head(sum(s(x) for s in self.smoothers) / len(self.smoothers))
        model = MultiSmooth([3, 5])
        opt = torch.optim.SGD(model.parameters(), 0.1)
        model(torch.randn(2, 4, 8)).sum().backward()
        opt.step()
        """, "GT401", holds="len(model.state_dict()) == 2"), Shape("""
        class Smoother(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.width = width
                self.mix = nn.Linear(width, width)
            def forward(self, x):
                return self.mix(x)
        class MultiSmooth(nn.Module):
            def __init__(self, widths):
                super().__init__()
                self.smoothers = [Smoother(w) for w in widths]
                self.head = nn.Linear(8, 1)
            def forward(self, x):
                return self.head(sum(s(x) for s in self.smoothers) / len(self.smoothers))
        model = MultiSmooth([8, 8])
        """, "GT401", 11, holds="len(list(model.parameters())) == 2")),
    # transfer-learning IRM: `self.scale = torch.tensor(1.).requires_grad_()` is the dummy
    # classifier the penalty differentiates against; here by keyword and as one tensor
    "penalty-probe-differentiated-against": (Shape("""
        class SlopePenalty(nn.Module):
            def __init__(self):
                super().__init__()
                self.probe = torch.ones((), requires_grad=True)
            def forward(self, logits, target):
                risk = F.cross_entropy(logits * self.probe, target)
                g, = torch.autograd.grad(outputs=risk, inputs=self.probe, create_graph=True)
                return g.pow(2)
        net = nn.Linear(3, 2)
        penalty = SlopePenalty()
        opt = torch.optim.SGD(net.parameters(), 0.1)
        penalty(net(torch.randn(4, 3)), torch.tensor([0, 1, 1, 0])).backward()
        opt.step()
        """, "GT402", holds="net.weight.grad is not None"), Shape("""
        class TemperedLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.probe = torch.ones((), requires_grad=True)
            def forward(self, logits, target):
                return F.cross_entropy(logits * self.probe, target)
        loss_fn = TemperedLoss()
        """, "GT402", 4, holds="len(list(loss_fn.parameters())) == 0")),
    # torchattacks PGD-RS: `delta = delta_last + alpha * grad.sign()` with `grad` from
    # `autograd.grad` (no history), then `delta = clamp(delta, ...)`: a leaf again each pass
    "step-rebuilt-from-a-plain-gradient": (Shape("""
        net = nn.Linear(3, 2)
        x0, lab = torch.rand(4, 3), torch.tensor([0, 1, 1, 0])
        base = torch.zeros(4, 3)
        adv = torch.zeros(4, 3)
        for _ in range(3):
            adv.requires_grad = True
            loss = F.cross_entropy(net(x0 + adv), lab)
            g = torch.autograd.grad(loss, [adv])[0]
            adv = base + 0.01 * g.sign()
            adv = adv.clamp(-0.1, 0.1)
        """, "GT303", holds="adv.grad_fn is None"), Shape("""
        net = nn.Linear(3, 2)
        x0, lab = torch.rand(4, 3), torch.tensor([0, 1, 1, 0])
        adv = torch.zeros(4, 3)
        for _ in range(3):
            adv.requires_grad = True
            loss = F.cross_entropy(net(x0 + adv), lab)
            g = torch.autograd.grad(loss, [adv], create_graph=True)[0]
            adv = x0 + 0.01 * g
            adv = adv.clamp(-0.1, 0.1)
        """, "GT303", 9, LEAF_FLAG)),
    # torchattacks SparseFool: each pass starts with `adv_image = adv_images[idx]` (stored
    # detached) before setting the flag; the value rebound at the end never reaches it
    "flag-set-after-a-fresh-rebinding-each-pass": (Shape("""
        net = nn.Linear(3, 1)
        pool = [torch.rand(1, 3) for _ in range(2)]
        for rnd in range(2):
            for i in range(2):
                cur = pool[i]
                if rnd > 5:
                    continue
                cur.requires_grad = True
                g, = torch.autograd.grad(net(cur).sum(), cur)
                cur = torch.clamp(cur + 0.1 * g, 0, 1)
                pool[i] = cur.detach()
        """, "GT303", holds="pool[0].grad_fn is None"), Shape("""
        net = nn.Linear(3, 1)
        cur = torch.rand(1, 3)
        for rnd in range(2):
            if rnd > 5:
                cur = torch.rand(1, 3)
            cur.requires_grad = True
            g, = torch.autograd.grad(net(cur).sum(), cur)
            cur = torch.clamp(cur + 0.1 * g, 0, 1)
        """, "GT303", 8, LEAF_FLAG)),
    # RepDistiller NST: an MMD whose teacher-only term `k(f_t, f_t).mean().detach()` is a
    # constant offset; the teacher features still reach the loss through `k(f_s, f_t)`
    "kernel-discrepancy-with-constant-offset-term": (Shape("""
        def kern(a, b):
            return (a @ b.T).pow(2)
        student, anchor_net = nn.Linear(3, 2), nn.Linear(3, 2)
        x = torch.randn(5, 3)
        q, t = student(x), anchor_net(x)
        loss = kern(q, q).mean() - 2 * kern(q, t).mean() + 0.5 * kern(t, t).mean().detach()
        loss.backward()
        """, "GT107", holds="student.weight.grad is not None"), Shape("""
        def kern(a, b):
            return (a @ b.T).pow(2)
        student, tower = nn.Linear(3, 2), nn.Linear(3, 2)
        x, y = torch.randn(5, 3), torch.randn(5, 2)
        q, t = student(x), tower(x)
        loss = F.mse_loss(q, y) + 0.5 * kern(t, t).mean().detach()
        loss.backward()
        """, "GT107", 6, holds="tower.weight.grad is None")),
    # SAC (sweetice): `value_optimizer.step()` between the value backward and backwards whose
    # graphs never reach the value network (the Q losses; an actor loss that reads it only
    # under `.detach()`): nothing they saved is modified
    "step-before-backwards-that-never-reach-its-model": (Shape("""
        def mlp(i):
            return nn.Sequential(nn.Linear(i, 4), nn.Tanh(), nn.Linear(4, 1))
        actor, critic, baseline = mlp(3), mlp(4), mlp(3)
        opt_a = torch.optim.SGD(actor.parameters(), 0.1)
        opt_c = torch.optim.SGD(critic.parameters(), 0.1)
        opt_b = torch.optim.SGD(baseline.parameters(), 0.1)
        s = torch.randn(6, 3)
        act = actor(s)
        q = critic(torch.cat([s, act], 1))
        b = baseline(s)
        b_loss = (b - q.detach()).pow(2).mean()
        c_loss = (q - 1.0).pow(2).mean()
        a_loss = (act * (act - q + b).detach()).mean()
        opt_b.zero_grad()
        b_loss.backward(retain_graph=True)
        opt_b.step()
        opt_c.zero_grad()
        c_loss.backward(retain_graph=True)
        opt_c.step()
        opt_a.zero_grad()
        a_loss.backward()
        opt_a.step()
        """, "GT601", holds="actor[0].weight.grad is not None"), Shape("""
        def mlp(i):
            return nn.Sequential(nn.Linear(i, 4), nn.Tanh(), nn.Linear(4, 1))
        actor, critic, baseline = mlp(3), mlp(4), mlp(3)
        opt_a = torch.optim.SGD(actor.parameters(), 0.1)
        opt_c = torch.optim.SGD(critic.parameters(), 0.1)
        opt_b = torch.optim.SGD(baseline.parameters(), 0.1)
        s = torch.randn(6, 3)
        act = actor(s)
        q = critic(torch.cat([s, act], 1))
        b = baseline(s)
        b_loss = (b - q.detach()).pow(2).mean()
        c_loss = (q - 1.0).pow(2).mean()
        a_loss = -(q - b.detach()).mean()
        opt_b.zero_grad()
        b_loss.backward(retain_graph=True)
        opt_b.step()
        opt_c.zero_grad()
        c_loss.backward(retain_graph=True)
        opt_c.step()
        opt_a.zero_grad()
        a_loss.backward()
        opt_a.step()
        """, "GT601", 19, INPLACE)),
    # transfer-learning pseudo-label loss: `forward(self, y, y_target)` where `y` is the
    # prediction (the input of `F.cross_entropy`), the mask a thresholded confidence
    "prediction-argument-named-like-a-target": (Shape("""
        class GatedRegressionLoss(nn.Module):
            def __init__(self, floor):
                super().__init__()
                self.floor = floor
            def forward(self, labels, reference):
                keep = (reference.detach().abs() > self.floor).float()
                return (F.mse_loss(labels, reference.detach(), reduction="none") * keep).mean()
        net = nn.Linear(3, 2)
        GatedRegressionLoss(0.1)(net(torch.randn(4, 3)), torch.randn(4, 2)).backward()
        """, "GT108", holds="net.weight.grad is not None"), Shape("""
        class GatedRegressionLoss(nn.Module):
            def __init__(self, floor):
                super().__init__()
                self.floor = floor
            def forward(self, reference, labels):
                keep = (reference.detach().abs() > self.floor).float()
                return (F.mse_loss(reference.detach(), labels, reduction="none") * keep).mean()
        net = nn.Linear(3, 2)
        GatedRegressionLoss(0.1)(net(torch.randn(4, 3)), torch.randn(4, 2)).backward()
        """, "GT108", 6, ELEMENT0)),
    # continual-learning tutorial: `train(model, dataset=train_datasets[context_id], ...)` in
    # a loop over tasks, each call a whole training run with a fresh Adam (the protocol);
    # here a loop over curriculum stages handed over as the loop's variable
    "fresh-optimizer-per-phase-of-new-data": (Shape("""
        def fit_stage(net, stage, steps=3):
            opt = torch.optim.RMSprop(net.parameters(), lr=0.01)
            for _ in range(steps):
                for xb, yb in stage:
                    opt.zero_grad()
                    F.mse_loss(net(xb), yb).backward()
                    opt.step()
        net = nn.Linear(3, 1)
        before = net.weight.detach().clone()
        curriculum = [[(torch.randn(4, 3), torch.randn(4, 1))] for _ in range(3)]
        for stage in curriculum:
            fit_stage(net, stage)
        """, "GT436", holds="not torch.equal(before, net.weight)"), Shape("""
        def fit_stage(net, stage, steps=3):
            opt = torch.optim.RMSprop(net.parameters(), lr=0.01)
            for _ in range(steps):
                for xb, yb in stage:
                    opt.zero_grad()
                    F.mse_loss(net(xb), yb).backward()
                    opt.step()
        net = nn.Linear(3, 1)
        data = [(torch.randn(4, 3), torch.randn(4, 1))]
        for epoch in range(3):
            fit_stage(net, data, epoch + 1)
        """, "GT436", 2, holds="net.weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
