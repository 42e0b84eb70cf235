"""Shapes that fired wrongly on the projects of docs/triage/unseen17.md (session 17), each in
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
    # kaggle-rsna-intracranial-hemorrhage (src/cnn/main.py): `run_nn(cfg, 'valid', ...)`
    # under no_grad, whose backward sits under `if mode in ['train']:`: the constant mode
    # picks the other arm. Here `stage == "fit"` with the stage given by keyword. Twin: the
    # same helper called with the stage that trains, under no_grad: backward raises
    "helper-backward-behind-a-mode-string-the-call-rules-out": (Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def epoch(stage, xs):
            total = 0.0
            for x in xs:
                out = net(x).sum()
                if stage == "fit":
                    opt.zero_grad()
                    out.backward()
                    opt.step()
                total += out.item()
            return total
        xs = [torch.randn(2, 3) for _ in range(2)]
        epoch("fit", xs)
        with torch.no_grad():
            score = epoch(stage="score", xs=xs)
        """, "GT210", holds="isinstance(score, float)"), Shape("""
        net = nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def epoch(stage, xs):
            total = 0.0
            for x in xs:
                out = net(x).sum()
                if stage not in ("score", "predict"):
                    opt.zero_grad()
                    out.backward()
                    opt.step()
                total += out.item()
            return total
        xs = [torch.randn(2, 3) for _ in range(2)]
        with torch.no_grad():
            score = epoch(stage="fit", xs=xs)
        """, "GT210", line=14, raises=(RuntimeError, "does not require grad"))),
    # 02456-deep-learning-with-PyTorch (5_1 transformers notebook): `forward(ids,
    # retain_ws=False)` keeps `ws.retain_grad()` under `if retain_ws:`, and the sampler run
    # under no_grad calls `self.forward(ids)`, leaving the flag to its default. Here a
    # helper with `if not quiet:` and the flag passed by keyword. Twin: the no-grad call
    # turns the flag on: retain_grad raises
    "retain-grad-behind-a-flag-the-no-grad-call-leaves-off": (Shape("""
        lin = nn.Linear(3, 3)
        def embed(x, quiet=True):
            h = lin(x)
            if not quiet:
                h.retain_grad()
            return h
        h = embed(torch.randn(2, 3), quiet=False)
        h.sum().backward()
        seen = h.grad is not None
        @torch.no_grad()
        def predict(x):
            return embed(x, quiet=True).argmax(1)
        pred = predict(torch.randn(2, 3))
        """, "GT217", holds="seen and pred.shape == (2,)"), Shape("""
        lin = nn.Linear(3, 3)
        def embed(x, quiet=True):
            h = lin(x)
            if not quiet:
                h.retain_grad()
            return h
        def predict(x):
            with torch.no_grad():
                return embed(x, quiet=False).argmax(1)
        pred = predict(torch.randn(2, 3))
        """, "GT217", line=5, raises=(RuntimeError, "can't retain_grad"))),
    # d2l-pytorch and Dive-into-DL (conv-layer notebooks): `Y = corr2d(X, K)` before the
    # loop that fits a conv layer to it: `corr2d` is a function of the file, spelled like a
    # layer, computing from two fresh constant tensors: Y has no graph to free. Here a 1-d
    # cross-correlation. Twin: its kernel requires grad: the target keeps a graph, and the
    # second pass raises
    "target-from-a-layer-spelled-helper-of-constants": (Shape("""
        def conv1d_ref(sig, taps):
            out = torch.zeros(sig.shape[0] - 1)
            for i in range(out.shape[0]):
                out[i] = (sig[i:i + 2] * taps).sum()
            return out
        sig = torch.arange(6.0)
        taps = torch.tensor([0.5, -0.5])
        target = conv1d_ref(sig, taps)
        layer = nn.Conv1d(1, 1, 2, bias=False)
        opt = torch.optim.SGD(layer.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            loss = ((layer(sig.view(1, 1, -1)).view(-1) - target) ** 2).sum()
            loss.backward()
            opt.step()
        """, "GT507", holds="loss.item() >= 0"), Shape("""
        def conv1d_ref(sig, taps):
            out = torch.zeros(sig.shape[0] - 1)
            for i in range(out.shape[0]):
                out[i] = (sig[i:i + 2] * taps).sum()
            return out
        sig = torch.arange(6.0)
        taps = torch.tensor([0.5, -0.5], requires_grad=True)
        target = conv1d_ref(sig, taps)
        layer = nn.Conv1d(1, 1, 2, bias=False)
        opt = torch.optim.SGD(layer.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            loss = ((layer(sig.view(1, 1, -1)).view(-1) - target) ** 2).sum()
            loss.backward()
            opt.step()
        """, "GT507", line=8, raises=(RuntimeError, "second time"))),
    # PhyCRNet (PhyCRNet_burgers.py): `loss_func = loss_generator(dt, dx)` before the epoch
    # loop, handed to `compute_loss(output, loss_func)` next to a retained backward: building
    # a loss module of the file runs nothing, so it holds no graph across the step. Here a
    # plain smoothness loss class. Twin: the features handed to the loss are a model output made
    # before the loop: the second epoch's backward raises
    "loss-object-built-before-the-loop-next-to-a-retained-backward": (Shape("""
        class smoothness:
            def __init__(self, w):
                self.w = w
            def __call__(self, y):
                return self.w * (y[1:] - y[:-1]).pow(2).mean()
        def total(out, crit):
            return crit(out) + out.pow(2).mean()
        net = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        crit = smoothness(0.1)
        for epoch in range(3):
            opt.zero_grad()
            for k in range(2):
                out = net(torch.randn(4, 3))
                loss = total(out, crit)
                loss.backward(retain_graph=True)
            opt.step()
        """, "GT601", holds="loss.item() >= 0"), Shape("""
        class smoothness:
            def __init__(self, w):
                self.w = w
            def __call__(self, y):
                return self.w * (y[1:] - y[:-1]).pow(2).mean()
        def total(out, crit):
            return crit(out) + out.pow(2).mean()
        net = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        crit = smoothness(0.1)
        feats = net(torch.randn(4, 3))
        for epoch in range(3):
            opt.zero_grad()
            loss = total(feats, crit)
            loss.backward(retain_graph=True)
            opt.step()
        """, "GT601", line=14, raises=(RuntimeError, "modified by an inplace operation"))),
    # segan_pytorch (generator.py): `self.skip_k = nn.Parameter(...)` then
    # `self.skip_k.requires_grad = False` in the arm where the skip is a constant; another
    # arm makes `self.skip_k` a Conv1d. The flag is set on a Parameter, which it freezes.
    # Here the Parameter arm is the `else`. Twin: the flag set right after the conv arm:
    # a plain attribute, the conv keeps training
    "requires-grad-set-on-the-parameter-arm-of-an-attribute": (Shape("""
        class Skip(nn.Module):
            def __init__(self, learnable):
                super().__init__()
                if learnable:
                    self.gain = nn.Conv1d(2, 2, 1)
                else:
                    self.gain = nn.Parameter(torch.ones(1, 2, 1))
                    self.gain.requires_grad = False
        fixed = Skip(False)
        frozen = not fixed.gain.requires_grad
        """, "GT407", holds="frozen"), Shape("""
        class Skip(nn.Module):
            def __init__(self, learnable):
                super().__init__()
                if learnable:
                    self.gain = nn.Parameter(torch.ones(1, 2, 1))
                else:
                    self.gain = nn.Conv1d(2, 2, 1)
                    self.gain.requires_grad = False
        fixed = Skip(False)
        training = fixed.gain.weight.requires_grad
        """, "GT407", line=8, holds="training")),
    # PyTorch-FastCampus, d2l-pytorch (tensor-basics notebooks): `torch.exp(x1)` as a cell's
    # last line, which displays it; the next cell makes a new `x1 = torch.FloatTensor(3, 4)`
    # without reading the old one: no update could have been seen. Here a method call in a
    # function, the name rebound by the next statement. Twin: the value is read (summed)
    # before it is rebound: the sum is of the unsquashed scores
    "op-shown-then-its-name-rebound-unread": (Shape("""
        def demo():
            scores = torch.randn(4)
            scores.sigmoid()
            scores = torch.zeros(4)
            return scores
        out = demo()
        """, "GT708", holds="out.sum().item() == 0.0"), Shape("""
        def demo():
            scores = torch.full((4,), 5.0)
            scores.sigmoid()
            total = scores.sum()
            scores = torch.zeros(4)
            return total
        total = demo()
        """, "GT708", line=3, holds="total.item() == 20.0")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
