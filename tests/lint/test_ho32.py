"""The facts widened or added for held-out batch 32 (docs/triage/ho32.md), each as a buggy twin
that is reported on its line and a silent look-alike, in other spellings than the cases'. Every
snippet runs on real torch, and ``holds`` checks what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT443: a freeze with eval in `__init__` under a flag the construction sets is undone by
    # the loop's `train()`; built from a `**opts` dict literal that leaves the flag to its
    # False default, the freeze never runs (NOTE [construction arms])
    "eval-freeze-flag-left-default": (Shape("""
        class Tagger(nn.Module):
            def __init__(self, lock_encoder=False, hidden=4):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(3, hidden), nn.BatchNorm1d(hidden))
                self.out = nn.Linear(hidden, 2)
                if lock_encoder:
                    self.lock()
            def lock(self):
                self.encoder.eval()
                for p in self.encoder.parameters():
                    p.requires_grad_(False)
            def forward(self, x):
                return self.out(self.encoder(x))
        opts = {"lock_encoder": True, "hidden": 4}
        tagger = Tagger(**opts)
        opt = torch.optim.SGD(tagger.out.parameters(), lr=0.1)
        for epoch in range(2):
            tagger.train()
            opt.zero_grad()
            tagger(torch.randn(6, 3)).sum().backward()
            opt.step()
        """, "GT443", line=18, holds="tagger.encoder[1].training "
             "and tagger.encoder[1].num_batches_tracked.item() == 2"), Shape("""
        class Tagger(nn.Module):
            def __init__(self, lock_encoder=False, hidden=4):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(3, hidden), nn.BatchNorm1d(hidden))
                self.out = nn.Linear(hidden, 2)
                if lock_encoder:
                    self.lock()
            def lock(self):
                self.encoder.eval()
                for p in self.encoder.parameters():
                    p.requires_grad_(False)
            def forward(self, x):
                return self.out(self.encoder(x))
        opts = {"hidden": 4}
        tagger = Tagger(**opts)
        opt = torch.optim.SGD(tagger.parameters(), lr=0.1)
        for epoch in range(2):
            tagger.train()
            opt.zero_grad()
            tagger(torch.randn(6, 3)).sum().backward()
            opt.step()
        """, "GT443", holds="tagger.encoder[0].weight.requires_grad")),
    # GT443 on the eval in `__init__` when the part's own class overrides `train()` to keep
    # its frozen parts in eval: the freeze belongs to that switch; frozen through it, silent
    "eval-beside-own-train-switch": (Shape("""
        class Stem(nn.Module):
            def __init__(self, frozen=False):
                super().__init__()
                self.frozen = frozen
                self.lin, self.bn = nn.Linear(3, 4), nn.BatchNorm1d(4)
            def forward(self, x):
                return self.bn(self.lin(x))
            def train(self, mode=True):
                super().train(mode)
                if self.frozen:
                    self.bn.eval()
                return self
        class Probe(nn.Module):
            def __init__(self, freeze_stem=True):
                super().__init__()
                self.stem = Stem()
                if freeze_stem:
                    self.stem.eval()
                    for p in self.stem.parameters():
                        p.requires_grad = False
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.stem(x))
        probe = Probe()
        opt = torch.optim.SGD(probe.head.parameters(), lr=0.1)
        for epoch in range(2):
            probe.train()
            opt.zero_grad()
            probe(torch.randn(6, 3)).sum().backward()
            opt.step()
        """, "GT443", line=18, holds="probe.stem.bn.training"), Shape("""
        class Stem(nn.Module):
            def __init__(self, frozen=False):
                super().__init__()
                self.frozen = frozen
                self.lin, self.bn = nn.Linear(3, 4), nn.BatchNorm1d(4)
                if frozen:
                    for p in self.parameters():
                        p.requires_grad = False
            def forward(self, x):
                return self.bn(self.lin(x))
            def train(self, mode=True):
                super().train(mode)
                if self.frozen:
                    self.bn.eval()
                return self
        class Probe(nn.Module):
            def __init__(self, freeze_stem=True):
                super().__init__()
                self.stem = Stem(frozen=freeze_stem)
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(self.stem(x))
        probe = Probe()
        opt = torch.optim.SGD(probe.head.parameters(), lr=0.1)
        for epoch in range(2):
            probe.train()
            opt.zero_grad()
            probe(torch.randn(6, 3)).sum().backward()
            opt.step()
        """, "GT443", holds="not probe.stem.bn.training")),
    # GT512: the step after `if step % k: continue` runs every k passes (NOTE [skipped
    # passes]); a clear at the top of each pass leaves the last micro-batch alone in `.grad`;
    # cleared after the step, the micro-batches add up
    "clear-every-pass-step-after-skip": (Shape("""
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        xs = [torch.randn(4, 3) for _ in range(4)]
        for step, x in enumerate(xs, start=1):
            opt.zero_grad()
            (model(x).pow(2).mean() / 2).backward()
            if step % 2:
                continue
            opt.step()
        last = torch.autograd.grad(model(xs[-1]).pow(2).mean() / 2, model.weight)[0]
        """, "GT512", line=5, holds="torch.allclose(model.weight.grad, last)"), Shape("""
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        xs = [torch.randn(4, 3) for _ in range(4)]
        for step, x in enumerate(xs, start=1):
            (model(x).pow(2).mean() / 2).backward()
            if step % 2:
                continue
            both = model.weight.grad.clone()
            opt.step()
            opt.zero_grad()
        pair = sum(model(x).pow(2).mean() / 2 for x in xs[-2:])
        summed = torch.autograd.grad(pair, model.weight)[0]
        """, "GT512", holds="torch.allclose(both, summed)")),
    # GT480: an optimizer built over a plain tensor that the function then wraps in a new
    # Parameter for the model: the Parameter gets the gradient, the optimizer's tensor never
    # does; wrapped first, the optimizer holds the trained object
    "optimizer-before-parameter-wrap": (Shape("""
        def make_bank(n):
            codes = torch.randn(n, 3)
            opt = torch.optim.Adam([codes], lr=0.1)
            bank = nn.Parameter(codes)
            return bank, opt
        bank, opt = make_bank(4)
        before = bank.detach().clone()
        bank.pow(2).sum().backward()
        opt.step()
        """, "GT480", line=3, holds="torch.equal(bank.detach(), before) "
             "and opt.param_groups[0]['params'][0].grad is None"), Shape("""
        def make_bank(n):
            codes = nn.Parameter(torch.randn(n, 3))
            opt = torch.optim.Adam([codes], lr=0.1)
            return codes, opt
        bank, opt = make_bank(4)
        before = bank.detach().clone()
        bank.pow(2).sum().backward()
        opt.step()
        """, "GT480", holds="not torch.equal(bank.detach(), before)")),
    # GT703: the model returns a per-element loss and the script reduces it only on one
    # branch (`if gpus > 1: loss = loss.mean()`): on the other, backward() raises; reduced
    # on every path, it runs (NOTE [reduced on one branch])
    "per-element-loss-reduced-on-one-branch": (Shape("""
        class Regressor(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
                self.crit = nn.MSELoss(reduction="none")
            def forward(self, x, target=None):
                out = self.fc(x)
                if target is not None:
                    return self.crit(out, target)
                return out
        gpus = torch.cuda.device_count()
        net = Regressor()
        for _ in range(2):
            loss = net(torch.randn(4, 3), torch.randn(4, 1))
            if gpus > 1:
                loss = loss.mean()
            loss = loss * 0.5
            loss.backward()
        """, "GT703", line=15, raises=(RuntimeError, "only for scalar outputs")), Shape("""
        class Regressor(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
                self.crit = nn.MSELoss(reduction="none")
            def forward(self, x, target=None):
                out = self.fc(x)
                if target is not None:
                    return self.crit(out, target)
                return out
        gpus = torch.cuda.device_count()
        net = Regressor()
        for _ in range(2):
            loss = net(torch.randn(4, 3), torch.randn(4, 1))
            loss = loss.mean()
            loss = loss * 0.5
            loss.backward()
        """, "GT703", holds="net.fc.weight.grad is not None")),
    # GT509: a critic fed the encoder's output undetached; its optimizer holds only the
    # critic, then the encoder step reads the output again: the critic's call is the line to
    # change (NOTE [first pass into an unstepped producer]); fed `.detach()`, it runs
    "critic-pass-into-unstepped-encoder": (Shape("""
        encoder, critic = nn.Linear(3, 4), nn.Linear(4, 1)
        opt_c = torch.optim.SGD(critic.parameters(), lr=0.1)
        opt_e = torch.optim.SGD(encoder.parameters(), lr=0.1)
        for _ in range(2):
            h = torch.tanh(encoder(torch.randn(5, 3)))
            c_loss = critic(h).pow(2).mean()
            opt_c.zero_grad()
            c_loss.backward()
            opt_c.step()
            e_loss = -critic(h).mean()
            opt_e.zero_grad()
            e_loss.backward()
            opt_e.step()
        """, "GT509", line=6, raises=(RuntimeError, "backward through the graph a second time")),
        Shape("""
        encoder, critic = nn.Linear(3, 4), nn.Linear(4, 1)
        opt_c = torch.optim.SGD(critic.parameters(), lr=0.1)
        opt_e = torch.optim.SGD(encoder.parameters(), lr=0.1)
        for _ in range(2):
            h = torch.tanh(encoder(torch.randn(5, 3)))
            c_loss = critic(h.detach()).pow(2).mean()
            opt_c.zero_grad()
            c_loss.backward()
            opt_c.step()
            e_loss = -critic(h).mean()
            opt_e.zero_grad()
            e_loss.backward()
            opt_e.step()
        """, "GT509", holds="encoder.weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_reported(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_silent(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
