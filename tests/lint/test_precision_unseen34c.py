"""Shapes that fired wrongly on the projects of docs/triage/unseen34c.md (session 34: small
PyTorch libraries and toolkits, Kaggle solutions, course and book companions), each in another
spelling than the project's and next to a buggy twin that is still reported. The snippets run
on real torch."""
from __future__ import annotations

import sys
import types

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

# a helper package that re-exports torch's names, as `torch_snippets` does: `nn` comes from
# the star import, no import of the file binds it
STAR_PRELUDE = '''
from u34c_helpers import *
torch.manual_seed(0)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # jakc4103/DFQ (ZeroQ's quant_modules.py): `w = self.weight`, `w.data` read for the
    # quantisation range, then `w = self.weight_function(self.weight, bits, lo, hi)` (an
    # autograd Function's apply): the `.data` reads the parameter, never the later binding.
    # Twin: the `.data` of a layer's output that the return is built from
    "range-read-through-data-before-the-name-is-rebound": (Shape("""
        class RoundSTE(torch.autograd.Function):
            @staticmethod
            def forward(ctx, w, lo, hi):
                s = (hi - lo)[:, None] / 15
                return torch.round((w - lo[:, None]) / s) * s + lo[:, None]
            @staticmethod
            def backward(ctx, g):
                return g, None, None
        class QLinear(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(3, 4))
                self.quant = RoundSTE.apply
            def forward(self, x):
                w = self.weight
                flat = w.data.detach()
                lo, hi = flat.min(dim=1).values, flat.max(dim=1).values
                w = self.quant(self.weight, lo, hi)
                return F.linear(x, w)
        layer = QLinear()
        layer(torch.randn(2, 4)).sum().backward()
        """, "GT105", holds="layer.weight.grad is not None"),
        Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                w = self.proj(x)
                h = w.data
                return self.head(h)
        net = Net()
        net(torch.randn(2, 4)).sum().backward()
        """, "GT105", line=8, holds="net.proj.weight.grad is None")),
    # cornell-zhang/dnn-quant-ocs (distiller's tests/test_pruning.py): `mask =
    # channels.expand(f, c)`, then `mask.unsqueeze_(-1)` twice: an in-place change of the
    # view's shape, no element written, PyTorch runs it. Twin: an element write on the expand
    "shape-only-in-place-method-on-an-expand": (Shape("""
        channels = torch.ones(4)
        channels[1] = 0
        mask = channels.expand(3, 4)
        mask.unsqueeze_(-1)
        mask.unsqueeze_(-1)
        mask = mask.expand(3, 4, 2, 2).contiguous()
        """, "GT619", holds="mask.shape == (3, 4, 2, 2)"),
        Shape("""
        channels = torch.ones(4)
        mask = channels.expand(3, 4)
        mask.unsqueeze_(-1)
        mask.mul_(0.5)
        """, "GT619", line=4, raises=(RuntimeError, "single memory location"))),
    # Trusted-AI/adversarial-robustness-toolbox (hidden_trigger_backdoor_pytorch.py): `poison =
    # poison - lr * poison.grad`, then `pert = clamp(poison - orig, ...).detach_()` and
    # `poison = pert + orig`: rebuilt from a cut value, a leaf again, re-armed by
    # `requires_grad_()` at the top of the next pass. Twin: the rebuilt value is not cut
    "update-rebuilt-from-a-detached-perturbation": (Shape("""
        net = nn.Linear(4, 2)
        orig = torch.randn(3, 4)
        x = orig.clone()
        for i in range(3):
            x.requires_grad_()
            loss = net(x).pow(2).sum()
            loss.backward()
            x = x - 0.1 * x.grad
            pert = torch.clamp(x - orig, -0.5, 0.5).detach_()
            x = pert + orig
        """, "GT301", holds="x.grad is None and not x.requires_grad"),
        Shape("""
        net = nn.Linear(4, 2)
        orig = torch.randn(3, 4)
        x = orig.clone().requires_grad_()
        for i in range(3):
            loss = net(x).pow(2).sum()
            loss.backward()
            x = x - 0.1 * x.grad
            pert = torch.clamp(x - orig, -0.5, 0.5)
            x = pert + orig
        """, "GT301", line=7, raises=(TypeError, "NoneType"))),
    # Trusted-AI/adversarial-robustness-toolbox (tensorflow_v2_faster_rcnn.py `compute_loss`):
    # the losses summed as NumPy values and returned as `np.array([loss])`: nothing comes back
    # into torch, no caller can backpropagate it. Twin: the sum made a tensor again and
    # backpropagated
    "numpy-losses-returned-as-an-array": (Shape("""
        class Estimator:
            def __init__(self):
                self.model = nn.Linear(4, 2)
            def compute_loss(self, x, y):
                losses = {"a": F.mse_loss(self.model(x), y), "b": self.model(x).abs().mean()}
                loss = None
                for name in ("a", "b"):
                    if loss is None:
                        loss = losses[name].detach().numpy()
                    else:
                        loss = loss + losses[name].detach().numpy()
                total = np.array([loss])
                return total
        """, "GT103", holds="Estimator().compute_loss(torch.randn(3, 4), torch.randn(3, 2)).shape"
                            " == (1,)"),
        Shape("""
        model = nn.Linear(4, 2)
        x, y = torch.randn(3, 4), torch.randn(3, 2)
        losses = {"a": F.mse_loss(model(x), y), "b": model(x).abs().mean()}
        loss = None
        for name in ("a", "b"):
            if loss is None:
                loss = losses[name].detach().numpy()
            else:
                loss = loss + losses[name].detach().numpy()
        total = torch.tensor(np.array([loss]))
        total.sum().backward()
        """, "GT103", line=7, raises=(RuntimeError, "does not require grad"))),
    # SeldonIO/alibi-detect (cd_context_20newsgroup.py): `train_model(model, ...)` builds the
    # optimizer over `model.parameters()` and its loop calls the global `clf`; the only call
    # is `train_model(clf, ...)`: one instance under two names. Twin: the call hands another
    # instance
    "optimizer-over-the-argument-its-only-caller-passes": (Shape("""
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 3)
            def forward(self, x):
                return self.head(x)
        def train_model(model, loader, epochs=1):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    F.cross_entropy(clf(x), y).backward()
                    optimizer.step()
        clf = Classifier()
        other = Classifier()
        before = clf.head.weight.detach().clone()
        train_model(clf, [(torch.randn(4, 8), torch.randint(0, 3, (4,)))])
        """, "GT447", holds="not torch.equal(before, clf.head.weight)"),
        Shape("""
        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 3)
            def forward(self, x):
                return self.head(x)
        def train_model(model, loader, epochs=1):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    F.cross_entropy(clf(x), y).backward()
                    optimizer.step()
        clf = Classifier()
        other = Classifier()
        before = clf.head.weight.detach().clone()
        train_model(other, [(torch.randn(4, 8), torch.randint(0, 3, (4,)))])
        """, "GT447", line=8, holds="torch.equal(before, clf.head.weight)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# Packt's Modern-Computer-Vision-with-PyTorch (Chapter11/neural_style_transfer.py): `from
# torch_snippets import *` gives `nn`; `GramMatrix(nn.Module)` has no `__init__` and no
# weight: built inside `GramMSELoss.forward` (GT420) and repeated by `[GramMSELoss()] * 5`
# (GT446), nothing is lost. Twins: the same classes holding a layer
STAR_SHAPES: dict[str, tuple[Shape, Shape]] = {
    "weightless-module-built-in-forward-under-a-star-import": (Shape("""
        class Gram(nn.Module):
            def forward(self, x):
                f = x.flatten(2)
                return f @ f.transpose(1, 2) / f.shape[-1]
        class GramLoss(nn.Module):
            def forward(self, x, target):
                return F.mse_loss(Gram()(x), target)
        img = torch.randn(1, 3, 4, 4, requires_grad=True)
        GramLoss()(img, torch.zeros(1, 3, 3)).backward()
        """, "GT420", holds="img.grad is not None"),
        Shape("""
        class Gram(nn.Module):
            def __init__(self):
                super().__init__()
                self.mix = nn.Linear(16, 16)
            def forward(self, x):
                f = self.mix(x.flatten(2))
                return f @ f.transpose(1, 2) / f.shape[-1]
        class GramLoss(nn.Module):
            def forward(self, x, target):
                return F.mse_loss(Gram()(x), target)
        img = torch.randn(1, 3, 4, 4, requires_grad=True)
        loss_fn = GramLoss()
        loss_fn(img, torch.zeros(1, 3, 3)).backward()
        """, "GT420", line=10, holds="len(list(loss_fn.parameters())) == 0")),
    "weightless-loss-repeated-by-list-multiplication-under-a-star-import": (Shape("""
        class GramLoss(nn.Module):
            def forward(self, x, target):
                f = x.flatten(2)
                return F.mse_loss(f @ f.transpose(1, 2), target)
        img = torch.randn(1, 3, 4, 4, requires_grad=True)
        losses = [GramLoss()] * 3 + [nn.MSELoss()]
        sum(fn(img, torch.zeros(1, 3, 3)) for fn in losses[:3]).backward()
        """, "GT446", holds="img.grad is not None"),
        Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x)
        heads = [Head()] * 3
        """, "GT446", line=7, holds="heads[0].fc is heads[2].fc")),
}


@pytest.fixture
def star_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``u34c_helpers``: a stand-in re-exporting torch, nn and F; monkeypatch takes it out of
    ``sys.modules`` after the test."""
    mod = types.ModuleType("u34c_helpers")
    mod.torch, mod.nn, mod.F = torch, torch.nn, torch.nn.functional  # type: ignore[attr-defined]
    mod.__all__ = ["torch", "nn", "F"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "u34c_helpers", mod)
    assert "u34c_helpers" in sys.modules


@pytest.mark.parametrize("name", sorted(STAR_SHAPES))
def test_star_import_look_alike_is_silent(name: str, star_helpers: None) -> None:
    judge(STAR_PRELUDE, STAR_SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(STAR_SHAPES))
def test_star_import_twin_is_reported(name: str, star_helpers: None) -> None:
    judge(STAR_PRELUDE, STAR_SHAPES[name][1])


def test_star_helpers_are_put_back() -> None:
    assert "u34c_helpers" not in sys.modules
