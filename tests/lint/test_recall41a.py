"""The facts of docs/triage/recall41a.md (session 41). Each pair is a correct shape the checker
must leave alone and a buggy twin it must report on its line, written in other names and shapes
than the real-world cases; every snippet runs on real torch."""
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
    # GT438 one call further (NOTE [module handed to a training function]): the encoder is
    # built next to the head, handed to a training function of the file that calls it in its
    # backward-and-step loop, and the optimizer given to that function holds the head only:
    # the encoder gets gradients and never changes. The encoder stacks its layers by
    # `ModuleList.append`. Look-alike: the script freezes the encoder on purpose
    # (`requires_grad = False` over its parameters) before handing it over
    "encoder-handed-to-a-training-function": (Shape("""
        class Encoder(nn.Module):
            def __init__(self, d, depth):
                super().__init__()
                self.layers = nn.ModuleList()
                for _ in range(depth):
                    self.layers.append(nn.Linear(d, d))
            def forward(self, x):
                for layer in self.layers:
                    x = torch.tanh(layer(x))
                return x
        def fit(encoder, head, optimizer, steps):
            encoder.train()
            for _ in range(steps):
                x, y = torch.randn(8, 4), torch.randn(8, 1)
                loss = F.mse_loss(head(encoder(x)), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        encoder = Encoder(4, 2)
        head = nn.Linear(4, 1)
        for p in encoder.parameters():
            p.requires_grad = False
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
        before = [p.detach().clone() for p in encoder.parameters()]
        fit(encoder, head, optimizer, 2)
        """, "GT438", holds="all(torch.equal(a, b) for a, b in zip(before, encoder.parameters()))"
        ), Shape("""
        class Encoder(nn.Module):
            def __init__(self, d, depth):
                super().__init__()
                self.layers = nn.ModuleList()
                for _ in range(depth):
                    self.layers.append(nn.Linear(d, d))
            def forward(self, x):
                for layer in self.layers:
                    x = torch.tanh(layer(x))
                return x
        def fit(encoder, head, optimizer, steps):
            encoder.train()
            for _ in range(steps):
                x, y = torch.randn(8, 4), torch.randn(8, 1)
                loss = F.mse_loss(head(encoder(x)), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        encoder = Encoder(4, 2)
        head = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
        before = [p.detach().clone() for p in encoder.parameters()]
        fit(encoder, head, optimizer, 2)
        """, "GT438", line=21, holds="all(torch.equal(a, b) for a, b in zip(before, "
        "encoder.parameters())) and all(p.grad is not None for p in encoder.parameters())")),
    # The same fact in another style: everything inside `main()`, the modules handed over by
    # keyword to an epoch function, an evaluation function also given the encoder (`eval()`
    # under `no_grad`), a parameter count read from it. Look-alike: a linear probe, where
    # the epoch function runs the encoder under `torch.no_grad()` on purpose, so it gets no
    # gradient at all
    "backbone-passed-by-keyword-to-an-epoch-function": (Shape("""
        def run_epoch(net, clf, optim):
            for _ in range(2):
                x, y = torch.randn(6, 5), torch.randint(0, 3, (6,))
                with torch.no_grad():
                    feats = net(x)
                loss = F.cross_entropy(clf(feats), y)
                optim.zero_grad()
                loss.backward()
                optim.step()
        def evaluate(net, clf):
            net.eval()
            with torch.no_grad():
                return clf(net(torch.randn(2, 5))).argmax(1)
        def main():
            backbone = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 8))
            classifier = nn.Linear(8, 3)
            size = sum(p.numel() for p in backbone.parameters())
            opt = torch.optim.Adam(classifier.parameters(), lr=0.01)
            run_epoch(net=backbone, clf=classifier, optim=opt)
            evaluate(backbone, classifier)
            return size > 0 and all(p.grad is None for p in backbone.parameters())
        probed = main()
        """, "GT438", holds="probed"), Shape("""
        def run_epoch(net, clf, optim):
            for _ in range(2):
                x, y = torch.randn(6, 5), torch.randint(0, 3, (6,))
                feats = net(x)
                loss = F.cross_entropy(clf(feats), y)
                optim.zero_grad()
                loss.backward()
                optim.step()
        def evaluate(net, clf):
            net.eval()
            with torch.no_grad():
                return clf(net(torch.randn(2, 5))).argmax(1)
        def main():
            backbone = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 8))
            classifier = nn.Linear(8, 3)
            size = sum(p.numel() for p in backbone.parameters())
            first = [p.detach().clone() for p in backbone.parameters()]
            opt = torch.optim.Adam(classifier.parameters(), lr=0.01)
            run_epoch(net=backbone, clf=classifier, optim=opt)
            evaluate(backbone, classifier)
            same = all(torch.equal(a, b) for a, b in zip(first, backbone.parameters()))
            return same and all(p.grad is not None for p in backbone.parameters())
        frozen_by_mistake = main()
        """, "GT438", line=18, holds="frozen_by_mistake")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
