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
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
