"""Readings of docs/triage/static21a.md, written from each mechanism's sentence before reading
the code of the case it came from: buggy twins in several shapes (a script, a method of a
class, a helper one call away, a Lightning module, another spelling of the API) that real
torch shows wrong, and correct look-alikes of the same shape that run; the checker reports
the first and stays silent on the second."""
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

NO_GRAD_FN = (RuntimeError, "does not require grad and does not have a grad_fn")

# an optimizer whose step differentiates the gradients (Hutchinson's Hessian diagonal)
HESSIAN_OPT = """
        class HutchinsonSGD(torch.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))
            def _diag(self, params):
                grads = [p.grad for p in params]
                zs = [torch.randint(0, 2, p.shape).float() * 2 - 1 for p in params]
                with torch.enable_grad():
                    hz = torch.autograd.grad(grads, params, grad_outputs=zs)
                return [h * z for h, z in zip(hz, zs)]
            @torch.no_grad()
            def step(self):
                params = [p for g in self.param_groups for p in g["params"]]
                for p, d in zip(params, self._diag(params)):
                    p.sub_(0.1 * p.grad / (d.abs() + 1.0))
"""

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT117, mechanism: a module's own Parameter is read only through `.detach()`/`.data`,
    # so it is in no graph. Twin: `.detach()` in a helper method forward calls, the bias
    # live (silent: the weight never gets a gradient). Look-alike: the helper reads it live
    "weight-detached-in-helper-method": (Shape("""
        class MaskedLinear(nn.Module):
            def __init__(self, n, m):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(m, n))
                self.bias = nn.Parameter(torch.zeros(m))
                self.register_buffer("mask", torch.ones(m, n))
            def _kernel(self):
                return self.weight * self.mask
            def forward(self, x):
                return F.linear(x, self._kernel(), self.bias)
        net = MaskedLinear(4, 3)
        net(torch.randn(5, 4)).pow(2).mean().backward()
        """, "GT117", holds="net.weight.grad is not None"), Shape("""
        class MaskedLinear(nn.Module):
            def __init__(self, n, m):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(m, n))
                self.bias = nn.Parameter(torch.zeros(m))
                self.register_buffer("mask", torch.ones(m, n))
            def _kernel(self):
                return self.weight.detach() * self.mask
            def forward(self, x):
                return F.linear(x, self._kernel(), self.bias)
        net = MaskedLinear(4, 3)
        net(torch.randn(5, 4)).pow(2).mean().backward()
        """, "GT117", 8, holds="net.weight.grad is None and net.bias.grad is not None")),
    # GT117, every parameter of a stacked network read through `.detach()` in a script's
    # training loop: the loss has no graph. Look-alike: the same class whose Parameters are
    # made with requires_grad=False next to a trained head (a fixed projection)
    "all-parameters-detached-in-sequential": (Shape("""
        class Affine(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(n), requires_grad=False)
                self.shift = nn.Parameter(torch.zeros(n), requires_grad=False)
            def forward(self, x):
                return x * self.scale.detach() + self.shift.detach()
        net = nn.Sequential(Affine(4), nn.Linear(4, 1))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT117"), Shape("""
        class Affine(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(n))
                self.shift = nn.Parameter(torch.zeros(n))
            def forward(self, x):
                return x * self.scale.detach() + self.shift
        net = nn.Sequential(Affine(4), Affine(4))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            net(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
        """, "GT117", 7, holds="net[0].scale.grad is None")),
    # GT117, a gate Parameter read through `.data` in a Lightning module's forward, the
    # training_step calling it. Look-alike: `.data` only clamps it in place (an update by
    # hand), forward reads it live
    "gate-data-in-lightning-forward": (Shape("""
        import lightning as L
        class Gated(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.gate = nn.Parameter(torch.ones(2))
            def forward(self, x):
                self.gate.data.clamp_(min=0.1)
                return self.fc(x) * self.gate
            def training_step(self, batch, idx):
                x, y = batch
                return F.mse_loss(self(x), y)
        m = Gated()
        m.training_step((torch.randn(6, 4), torch.randn(6, 2)), 0).backward()
        """, "GT117", holds="m.gate.grad is not None"), Shape("""
        import lightning as L
        class Gated(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.gate = nn.Parameter(torch.ones(2))
            def forward(self, x):
                return self.fc(x) * self.gate.data
            def training_step(self, batch, idx):
                x, y = batch
                return F.mse_loss(self(x), y)
        m = Gated()
        m.training_step((torch.randn(6, 4), torch.randn(6, 2)), 0).backward()
        """, "GT117", 8, holds="m.gate.grad is None and m.fc.weight.grad is not None")),
    # GT117, a codebook Parameter read through `.detach()`. Look-alike: an EMA keeps it by
    # hand (`self.codebook.data.mul_(...)`), the detach is the design. Twin: nothing updates
    # it, the optimizer holds it and it never moves
    "codebook-detached-without-ema": (Shape("""
        class Quantizer(nn.Module):
            def __init__(self, k, d):
                super().__init__()
                self.codebook = nn.Parameter(torch.randn(k, d))
            def forward(self, z):
                idx = torch.cdist(z, self.codebook.detach()).argmin(1)
                q = self.codebook.detach()[idx]
                if self.training:
                    with torch.no_grad():
                        self.codebook.data.mul_(0.99).add_(0.01 * z.mean(0))
                return z + (q - z).detach()
        enc = nn.Linear(4, 3)
        vq = Quantizer(5, 3)
        vq(enc(torch.randn(6, 4))).pow(2).mean().backward()
        """, "GT117", holds="vq.codebook.grad is None"), Shape("""
        class Quantizer(nn.Module):
            def __init__(self, k, d):
                super().__init__()
                self.codebook = nn.Parameter(torch.randn(k, d))
            def forward(self, z):
                idx = torch.cdist(z, self.codebook.detach()).argmin(1)
                q = self.codebook.detach()[idx]
                return z + (q - z).detach()
        enc = nn.Linear(4, 3)
        vq = Quantizer(5, 3)
        opt = torch.optim.SGD(list(enc.parameters()) + list(vq.parameters()), lr=0.1)
        before = vq.codebook.detach().clone()
        vq(enc(torch.randn(6, 4))).pow(2).mean().backward()
        opt.step()
        """, "GT117", 6, holds="vq.codebook.grad is None and torch.equal(before, vq.codebook)")),
    # GT302, mechanism: an in-place write into a view of a torch.nn layer's Parameter (an
    # alias, a slice, a chunk) with grad enabled. Twin: a top-level helper adds a prior into
    # `head.bias.view(2, -1)`, the layer passed by the script. Look-alike: the call is made
    # under no_grad
    "prior-added-into-bias-view-in-helper": (Shape("""
        def init_prior(head):
            b = head.bias.view(2, -1)
            b[:, 0] += 1.0
        det = nn.Conv2d(8, 6, 1)
        with torch.no_grad():
            init_prior(det)
        """, "GT302", holds="float(det.bias.view(2, -1)[0, 0]) > 0.5"), Shape("""
        def init_prior(head):
            b = head.bias.view(2, -1)
            b[:, 0] += 1.0
        det = nn.Conv2d(8, 6, 1)
        init_prior(det)
        """, "GT302", 3, raises=(RuntimeError, "a view of a leaf Variable"))),
    # GT302, a loop over a ModuleList of layers in `__init__` zeroes a row of each weight.
    # Look-alike: the row is written through `.data`
    "row-zeroed-in-module-list-loop": (Shape("""
        class Heads(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
                for lin in self.heads:
                    lin.weight.data[0].zero_()
            def forward(self, x):
                return sum(h(x) for h in self.heads)
        m = Heads()
        m(torch.randn(2, 4)).sum().backward()
        """, "GT302", holds="float(m.heads[1].weight[0].abs().sum()) == 0.0"), Shape("""
        class Heads(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
                for lin in self.heads:
                    lin.weight[0].zero_()
            def forward(self, x):
                return sum(h(x) for h in self.heads)
        m = Heads()
        m(torch.randn(2, 4)).sum().backward()
        """, "GT302", 6, raises=(RuntimeError, "a view of a leaf Variable"))),
    # GT302, a script sets one bias entry of the last layer of a Sequential by index.
    # Look-alike: `nn.init.constant_` on the whole bias (it runs under no_grad)
    "bias-entry-set-on-sequential-element": (Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        nn.init.constant_(net[2].bias, 3.0)
        net(torch.randn(5, 4)).sum().backward()
        """, "GT302", holds="float(net[2].bias[1]) == 3.0"), Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        net[2].bias[1] = 3.0
        net(torch.randn(5, 4)).sum().backward()
        """, "GT302", 2, raises=(RuntimeError, "a view of a leaf Variable"))),
    # GT302, the LSTM forget-gate bias set through `.chunk(4)[1]` in a method of a class,
    # through an attribute (not getattr). Look-alike: inside `torch.no_grad()`
    "forget-gate-chunk-filled-in-method": (Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 3)
                self.reset()
            def reset(self):
                with torch.no_grad():
                    self.rnn.bias_ih_l0.chunk(4)[1].fill_(1.0)
            def forward(self, x):
                return self.rnn(x)[0]
        enc = Encoder()
        enc(torch.randn(5, 2, 4)).sum().backward()
        """, "GT302", holds="float(enc.rnn.bias_ih_l0[3]) == 1.0"), Shape("""
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 3)
                self.reset()
            def reset(self):
                self.rnn.bias_ih_l0.chunk(4)[1].fill_(1.0)
            def forward(self, x):
                return self.rnn(x)[0]
        enc = Encoder()
        enc(torch.randn(5, 2, 4)).sum().backward()
        """, "GT302", 7, raises=(RuntimeError, "Output 1 of Split is a view"))),
    # GT118, mechanism: `torch.tensor([...])` of a sequence holding Parameters copies their
    # values into a leaf without history. Twin: a script's learned polynomial coefficients,
    # `torch.tensor([a, 2 * b])` (the loss has no graph). Look-alike: `torch.stack`
    "coefficients-copied-in-script": (Shape("""
        a = nn.Parameter(torch.tensor(0.5))
        b = nn.Parameter(torch.tensor(-1.0))
        opt = torch.optim.SGD([a, b], lr=0.1)
        x = torch.linspace(0, 1, 8)
        coef = torch.stack([a, 2 * b])
        loss = ((coef[0] + coef[1] * x - x) ** 2).mean()
        loss.backward()
        opt.step()
        """, "GT118", holds="a.grad is not None"), Shape("""
        a = nn.Parameter(torch.tensor(0.5))
        b = nn.Parameter(torch.tensor(-1.0))
        opt = torch.optim.SGD([a, b], lr=0.1)
        x = torch.linspace(0, 1, 8)
        coef = torch.tensor([a, 2 * b])
        loss = ((coef[0] + coef[1] * x - x) ** 2).mean()
        loss.backward()
        opt.step()
        """, "GT118", 5, raises=NO_GRAD_FN)),
    # GT118, a helper one call away given two global Parameters, `x.new_tensor(...)` the
    # spelling. Look-alike: the helper reads the values (`.item()`) for a log line
    "scales-copied-by-new-tensor-in-helper": (Shape("""
        def scales(p, q, like):
            return like.new_tensor([p.item(), q.item()])
        s1 = nn.Parameter(torch.ones(()))
        s2 = nn.Parameter(torch.ones(()))
        head = nn.Linear(3, 2)
        out = head(torch.randn(4, 3)) * torch.stack([s1, s2])
        logged = scales(s1, s2, out)
        out.pow(2).mean().backward()
        """, "GT118", holds="s1.grad is not None"), Shape("""
        def scales(p, q, like):
            return like.new_tensor([p, q])
        s1 = nn.Parameter(torch.ones(()))
        s2 = nn.Parameter(torch.ones(()))
        head = nn.Linear(3, 2)
        out = head(torch.randn(4, 3)) * scales(s1, s2, head.weight)
        out.pow(2).mean().backward()
        """, "GT118", 2, holds="s1.grad is None and head.weight.grad is not None")),
    # GT118, a class ties its kernel to two Parameters a helper function returns, built in
    # `__init__` with `torch.as_tensor` and wrapped as the layer's weight. Look-alike: the
    # Parameters are registered and the kernel is built from them with `torch.stack` in
    # forward
    "tied-kernel-built-in-init-from-helper-parameters": (Shape("""
        def make_pair():
            return nn.Parameter(torch.zeros(())), nn.Parameter(torch.ones(()))
        class Tied(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = make_pair()
            def forward(self, x):
                k = torch.stack([self.a + self.b, self.a - self.b]).view(1, 1, 2)
                return F.conv1d(x, k)
        m = Tied()
        m(torch.randn(2, 1, 5)).sum().backward()
        """, "GT118", holds="m.a.grad is not None"), Shape("""
        def make_pair():
            return nn.Parameter(torch.zeros(())), nn.Parameter(torch.ones(()))
        class Tied(nn.Module):
            def __init__(self):
                super().__init__()
                a, b = make_pair()
                self.conv = nn.Conv1d(1, 1, 2, bias=False)
                self.conv.weight = nn.Parameter(torch.as_tensor([[[a + b, a - b]]]))
            def forward(self, x):
                return self.conv(x)
        m = Tied()
        m(torch.randn(2, 1, 5)).sum().backward()
        """, "GT118", 8, holds="len(list(m.parameters())) == 1")),
    # GT534, mechanism: a scheduler stepped on every micro-batch while the optimizer steps
    # every `accum` passes. Twin: a script's OneCycleLR sized in optimizer updates, stepped
    # after the accumulation `if` (torch raises when it overruns). Look-alike: stepped under
    # the same `if`
    "one-cycle-stepped-every-micro-batch-in-script": (Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        accum, n_updates = 4, 3
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=n_updates)
        loader = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(accum * n_updates)]
        for i, (x, y) in enumerate(loader):
            (F.mse_loss(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                opt.step()
                opt.zero_grad()
                sched.step()
        """, "GT534", holds="sched.last_epoch == 3"), Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        accum, n_updates = 4, 3
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=n_updates)
        loader = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(accum * n_updates)]
        for i, (x, y) in enumerate(loader):
            (F.mse_loss(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                opt.step()
                opt.zero_grad()
            sched.step()
        """, "GT534", 11, raises=(ValueError, "Tried to step"))),
    # GT534, a trainer class's method: `self.scheduler` (a StepLR of `__init__`) stepped on
    # every micro-batch, the update every `self.accum` passes decided through a flag.
    # Look-alike: the schedule counts micro-batches (`step_size=len(loader)`), stepping it
    # every pass is its design
    "steplr-stepped-every-micro-batch-in-trainer": (Shape("""
        class Trainer:
            def __init__(self, model, loader):
                self.model, self.loader, self.accum = model, loader, 2
                self.opt = torch.optim.SGD(model.parameters(), lr=1.0)
                self.scheduler = torch.optim.lr_scheduler.StepLR(self.opt, len(loader), 0.5)
            def epoch(self):
                for i, (x, y) in enumerate(self.loader):
                    F.mse_loss(self.model(x), y).div(self.accum).backward()
                    update = (i + 1) % self.accum == 0
                    if update:
                        self.opt.step()
                        self.opt.zero_grad()
                    self.scheduler.step()
        t = Trainer(nn.Linear(3, 1), [(torch.randn(2, 3), torch.randn(2, 1))] * 4)
        t.epoch()
        """, "GT534", holds="t.opt.param_groups[0]['lr'] == 0.5"), Shape("""
        class Trainer:
            def __init__(self, model, loader):
                self.model, self.loader, self.accum = model, loader, 2
                self.opt = torch.optim.SGD(model.parameters(), lr=1.0)
                self.scheduler = torch.optim.lr_scheduler.StepLR(self.opt, 1, 0.5)
            def epoch(self):
                for i, (x, y) in enumerate(self.loader):
                    F.mse_loss(self.model(x), y).div(self.accum).backward()
                    update = (i + 1) % self.accum == 0
                    if update:
                        self.opt.step()
                        self.opt.zero_grad()
                    self.scheduler.step()
        t = Trainer(nn.Linear(3, 1), [(torch.randn(2, 3), torch.randn(2, 1))] * 4)
        t.epoch()
        """, "GT534", 13, holds="t.opt.param_groups[0]['lr'] == 0.5 ** 4")),
    # GT534, a warmup LambdaLR a helper builds, stepped every micro-batch of a training
    # function. Look-alike: a plateau scheduler stepped with the loss every pass (a metric:
    # its own mechanism, counting no steps)
    "warmup-lambda-from-helper-stepped-every-micro-batch": (Shape("""
        def train(model, batches, accum):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
            for step, (x, y) in enumerate(batches):
                loss = F.mse_loss(model(x), y) / accum
                loss.backward()
                if step % accum == accum - 1:
                    opt.step()
                    opt.zero_grad()
                plateau.step(loss.item())
            return opt
        o = train(nn.Linear(3, 1), [(torch.randn(2, 3), torch.randn(2, 1))] * 8, 4)
        """, "GT534", holds="o.param_groups[0]['lr'] == 1e-3"), Shape("""
        def warmup(opt, warm):
            return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
        def train(model, batches, accum):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            sched = warmup(opt, 2)
            for step, (x, y) in enumerate(batches):
                loss = F.mse_loss(model(x), y) / accum
                loss.backward()
                if step % accum == accum - 1:
                    opt.step()
                    opt.zero_grad()
                sched.step()
            return opt
        o = train(nn.Linear(3, 1), [(torch.randn(2, 3), torch.randn(2, 1))] * 8, 4)
        """, "GT534", 12, holds="o.param_groups[0]['lr'] == 1e-3")),
    # GT712, mechanism: an argparse flag with `type=bool` (any non-empty string is True)
    # decides how gradients are taken. Twin: a script's `create_graph=not args.first_order`,
    # run with `--first-order False`: the inner gradient has no graph. Look-alike:
    # `action="store_true"`
    "first-order-flag-in-create-graph": (Shape("""
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--first-order", action="store_true")
        args = parser.parse_args([])
        w = torch.randn(3, requires_grad=True)
        loss = (w ** 3).sum()
        (g,) = torch.autograd.grad(loss, w, create_graph=not args.first_order)
        """, "GT712", holds="g.requires_grad"), Shape("""
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--first-order", type=bool, default=False)
        args = parser.parse_args(["--first-order", "False"])
        w = torch.randn(3, requires_grad=True)
        loss = (w ** 3).sum()
        (g,) = torch.autograd.grad(loss, w, create_graph=not args.first_order)
        """, "GT712", 3, holds="args.first_order is True and not g.requires_grad")),
    # GT712, a trainer keeps the flag on `self` and freezes its backbone through
    # `requires_grad_(not self.freeze)`. Look-alike: a `type=bool` flag that only decides
    # what is printed
    "freeze-flag-kept-on-self": (Shape("""
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--freeze-backbone", type=int, default=0)
        parser.add_argument("--verbose", type=bool, default=False)
        args = parser.parse_args(["--freeze-backbone", "0", "--verbose", "False"])
        class Trainer:
            def __init__(self, backbone, args):
                self.freeze = bool(args.freeze_backbone)
                self.loud = args.verbose
                backbone.requires_grad_(not self.freeze)
                if self.loud:
                    print("backbone trainable")
        net = nn.Linear(3, 2)
        Trainer(net, args)
        """, "GT712", holds="net.weight.requires_grad"), Shape("""
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--freeze-backbone", type=bool, default=False)
        args = parser.parse_args(["--freeze-backbone", "False"])
        class Trainer:
            def __init__(self, backbone, args):
                self.freeze = args.freeze_backbone
                backbone.requires_grad_(not self.freeze)
        net = nn.Linear(3, 2)
        Trainer(net, args)
        """, "GT712", 3, holds="not net.weight.requires_grad")),
    # GT712, the flag copied into a config dict, read in a helper whose `if` detaches the
    # target. Look-alike: the option converted by a function that reads "false"
    "detach-flag-through-config-dict": (Shape("""
        import argparse
        def str2bool(s):
            return s.lower() in ("1", "true", "yes")
        parser = argparse.ArgumentParser()
        parser.add_argument("--stop-grad", type=str2bool, default=True)
        args = parser.parse_args(["--stop-grad", "False"])
        cfg = {"stop_grad": args.stop_grad}
        def target_of(teacher_out):
            if cfg["stop_grad"]:
                teacher_out = teacher_out.detach()
            return teacher_out
        teacher = nn.Linear(3, 3)
        t = target_of(teacher(torch.randn(2, 3)))
        """, "GT712", holds="t.requires_grad"), Shape("""
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--stop-grad", type=bool, default=True)
        args = parser.parse_args(["--stop-grad", "False"])
        cfg = {"stop_grad": args.stop_grad}
        def target_of(teacher_out):
            if cfg["stop_grad"]:
                teacher_out = teacher_out.detach()
            return teacher_out
        teacher = nn.Linear(3, 3)
        t = target_of(teacher(torch.randn(2, 3)))
        """, "GT712", 3, holds="not t.requires_grad")),
    # GT505, mechanism: an object kept across a training loop whose method adds its argument
    # into the object's state (`self.sum += val * n`), given the loss with its graph on every
    # pass. Twin: a script's AverageMeter. Look-alike: `meter.update(loss.item(), n)`
    "average-meter-given-loss-in-script": (Shape("""
        class AverageMeter:
            def __init__(self):
                self.sum, self.count = 0, 0
            def update(self, val, n=1):
                self.sum += val * n
                self.count += n
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        meter = AverageMeter()
        for x, y in [(torch.randn(2, 4), torch.randn(2, 1))] * 3:
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            meter.update(loss.item(), x.size(0))
        """, "GT505", holds="isinstance(meter.sum, float)"), Shape("""
        class AverageMeter:
            def __init__(self):
                self.sum, self.count = 0, 0
            def update(self, val, n=1):
                self.sum += val * n
                self.count += n
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        meter = AverageMeter()
        for x, y in [(torch.randn(2, 4), torch.randn(2, 1))] * 3:
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            meter.update(loss, x.size(0))
        """, "GT505", 15, holds="meter.sum.grad_fn is not None")),
    # GT505, a trainer class keeps a history object on `self` whose `add` appends; its epoch
    # method passes the loss. Look-alike: the history's `add` stores `float(v)`
    "history-appends-loss-in-trainer-method": (Shape("""
        class History:
            def __init__(self):
                self.values = []
            def add(self, v):
                self.values.append(float(v))
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.history = History()
            def epoch(self, batches):
                for x, y in batches:
                    self.opt.zero_grad()
                    loss = F.mse_loss(self.model(x), y)
                    loss.backward()
                    self.opt.step()
                    self.history.add(loss)
        t = Trainer(nn.Linear(3, 1))
        t.epoch([(torch.randn(2, 3), torch.randn(2, 1))] * 3)
        """, "GT505", holds="isinstance(t.history.values[0], float)"), Shape("""
        class History:
            def __init__(self):
                self.values = []
            def add(self, v):
                self.values.append(v)
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.history = History()
            def epoch(self, batches):
                for x, y in batches:
                    self.opt.zero_grad()
                    loss = F.mse_loss(self.model(x), y)
                    loss.backward()
                    self.opt.step()
                    self.history.add(loss)
        t = Trainer(nn.Linear(3, 1))
        t.epoch([(torch.randn(2, 3), torch.randn(2, 1))] * 3)
        """, "GT505", 17, holds="t.history.values[0].grad_fn is not None")),
    # GT505, a training function given the meter by its caller. Look-alike: it passes
    # `loss.detach()`
    "meter-passed-to-training-function": (Shape("""
        class Meter:
            def __init__(self):
                self.total = 0.0
            def record(self, value):
                self.total = self.total + value
        def train(model, opt, batches, meter):
            for x, y in batches:
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                meter.record(loss.detach())
        m = Meter()
        net = nn.Linear(3, 1)
        data = [(torch.randn(2, 3), torch.randn(2, 1))] * 3
        train(net, torch.optim.SGD(net.parameters(), lr=0.1), data, m)
        """, "GT505", holds="m.total.grad_fn is None"), Shape("""
        class Meter:
            def __init__(self):
                self.total = 0.0
            def record(self, value):
                self.total = self.total + value
        def train(model, opt, batches, meter):
            for x, y in batches:
                loss = F.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                meter.record(loss)
        m = Meter()
        net = nn.Linear(3, 1)
        data = [(torch.randn(2, 3), torch.randn(2, 1))] * 3
        train(net, torch.optim.SGD(net.parameters(), lr=0.1), data, m)
        """, "GT505", 12, holds="m.total.grad_fn is not None")),
    # GT307, mechanism: a module keeps a layer's output on `self` (a non-leaf) and the
    # caller reads that attribute's `.grad` after backward: None. Twin: a script reads
    # `net.feat.grad`. Look-alike: the forward retains its gradient
    "kept-feature-grad-read-in-script": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 3)
                self.head = nn.Linear(3, 1)
            def forward(self, x):
                self.feat = self.enc(x)
                self.feat.retain_grad()
                return self.head(self.feat)
        net = Net()
        net(torch.randn(2, 4)).sum().backward()
        g = net.feat.grad
        """, "GT307", holds="g is not None"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 3)
                self.head = nn.Linear(3, 1)
            def forward(self, x):
                self.feat = self.enc(x)
                return self.head(self.feat)
        net = Net()
        net(torch.randn(2, 4)).sum().backward()
        g = net.feat.grad
        """, "GT307", 7, holds="g is None")),
    # GT307, a saliency helper reads `model.logits.grad`, the logits kept by an `encode`
    # method as a product. Look-alike: the helper reads a Parameter the module keeps
    "kept-logits-grad-read-in-helper": (Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.temp = nn.Parameter(torch.ones(()))
            def encode(self, x):
                return self.fc(x) * self.temp
            def forward(self, x):
                return self.encode(x).logsumexp(-1)
        def sensitivity(model, x):
            model(x).sum().backward()
            return model.temp.grad
        m = Scorer()
        s = sensitivity(m, torch.randn(3, 4))
        """, "GT307", holds="s is not None"), Shape("""
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.temp = nn.Parameter(torch.ones(()))
            def encode(self, x):
                self.logits = self.fc(x) * self.temp
                return self.logits
            def forward(self, x):
                return self.encode(x).logsumexp(-1)
        def sensitivity(model, x):
            model(x).sum().backward()
            return model.logits.grad
        m = Scorer()
        s = sensitivity(m, torch.randn(3, 4))
        """, "GT307", 7, holds="s is None")),
    # GT713, mechanism: an optimizer of the file differentiates `.grad` in its step (a
    # Hessian estimate), stepped after a backward without `create_graph=True`. Twin: a
    # script loop. Look-alike: `backward(create_graph=True)`
    "hessian-optimizer-stepped-in-script": (Shape(HESSIAN_OPT + """
        model = nn.Linear(3, 1)
        opt = HutchinsonSGD(model.parameters())
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 3)).pow(2).mean().backward(create_graph=True)
            opt.step()
        """, "GT713"), Shape(HESSIAN_OPT + """
        model = nn.Linear(3, 1)
        opt = HutchinsonSGD(model.parameters())
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(4, 3)).pow(2).mean().backward()
            opt.step()
        """, "GT713", 20, raises=NO_GRAD_FN)),
    # GT713, a trainer's method; the look-alike's optimizer reads `.grad` only (no second
    # differentiation), so a plain backward is right
    "hessian-optimizer-stepped-in-trainer": (Shape("""
        class SignSGD(torch.optim.Optimizer):
            def __init__(self, params, lr=0.1):
                super().__init__(params, dict(lr=lr))
            @torch.no_grad()
            def step(self):
                for g in self.param_groups:
                    for p in g["params"]:
                        p.sub_(g["lr"] * p.grad.sign())
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = SignSGD(model.parameters())
            def fit(self, x):
                self.opt.zero_grad()
                loss = self.model(x).pow(2).mean()
                loss.backward()
                self.opt.step()
        Trainer(nn.Linear(3, 1)).fit(torch.randn(4, 3))
        """, "GT713"), Shape(HESSIAN_OPT + """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.opt = HutchinsonSGD(model.parameters())
            def fit(self, x):
                self.opt.zero_grad()
                loss = self.model(x).pow(2).mean()
                loss.backward()
                self.opt.step()
        Trainer(nn.Linear(3, 1)).fit(torch.randn(4, 3))
        """, "GT713", 23, raises=NO_GRAD_FN)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
