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
    # One call further still: the training function hands the module on to a loss helper
    # (`forward_loss(net, head, batch)`) inside its backward-and-step loop; the helper runs it
    # with grad on. Look-alike: the script freezes the trunk with `requires_grad_(False)`
    "trunk-run-by-a-loss-helper-of-the-training-function": (Shape("""
        def forward_loss(net, head, batch):
            x, y = batch
            return F.mse_loss(head(net(x)), y)
        def train(net, head, opt, batches):
            for batch in batches:
                opt.zero_grad()
                loss = forward_loss(net, head, batch)
                loss.backward()
                opt.step()
        trunk = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
        head = nn.Linear(6, 1)
        trunk.requires_grad_(False)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        train(trunk, head, opt, [(torch.randn(5, 4), torch.randn(5, 1))] * 2)
        """, "GT438", holds="all(p.grad is None for p in trunk.parameters())"), Shape("""
        def forward_loss(net, head, batch):
            x, y = batch
            return F.mse_loss(head(net(x)), y)
        def train(net, head, opt, batches):
            for batch in batches:
                opt.zero_grad()
                loss = forward_loss(net, head, batch)
                loss.backward()
                opt.step()
        trunk = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
        head = nn.Linear(6, 1)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        w0 = [p.detach().clone() for p in trunk.parameters()]
        train(trunk, head, opt, [(torch.randn(5, 4), torch.randn(5, 1))] * 2)
        """, "GT438", line=12, holds="all(torch.equal(a, b) for a, b in zip(w0, trunk.parameters()))"
        " and all(p.grad is not None for p in trunk.parameters())")),
    # The loop in the script itself, the module run by a step helper it is handed to.
    # Look-alike: each module has its own optimizer, both stepped in the loop
    "encoder-run-by-a-step-helper-in-the-script-loop": (Shape("""
        def step_loss(enc, dec, x):
            return (dec(enc(x)) - x).pow(2).mean()
        enc = nn.Linear(6, 2)
        dec = nn.Linear(2, 6)
        opt_dec = torch.optim.Adam(dec.parameters(), lr=0.01)
        opt_enc = torch.optim.Adam(enc.parameters(), lr=0.01)
        w0 = enc.weight.detach().clone()
        for _ in range(2):
            loss = step_loss(enc, dec, torch.randn(3, 6))
            opt_dec.zero_grad()
            opt_enc.zero_grad()
            loss.backward()
            opt_dec.step()
            opt_enc.step()
        """, "GT438", holds="not torch.equal(w0, enc.weight)"), Shape("""
        def step_loss(enc, dec, x):
            return (dec(enc(x)) - x).pow(2).mean()
        enc = nn.Linear(6, 2)
        dec = nn.Linear(2, 6)
        opt_dec = torch.optim.Adam(dec.parameters(), lr=0.01)
        w0 = enc.weight.detach().clone()
        for _ in range(2):
            loss = step_loss(enc, dec, torch.randn(3, 6))
            opt_dec.zero_grad()
            loss.backward()
            opt_dec.step()
        """, "GT438", line=5, holds="torch.equal(w0, enc.weight) and enc.weight.grad is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# GT438 across files (NOTE [module handed to a training function], NOTE [project index]): the
# script hands its modules to `train_one_epoch` imported from the project's `engine.py`
# (DETR / torchvision-reference style). Look-alike: the optimizer holds both modules
ENGINE = '''
import torch.nn.functional as F


def train_one_epoch(model, head, batches, optimizer):
    model.train()
    for x, y in batches:
        loss = F.mse_loss(head(model(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''
MAIN = '''
import torch
from torch import nn

from engine import train_one_epoch

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
head = nn.Linear(8, 1)
params = {params}
optimizer = torch.optim.SGD(params, lr=0.1)
before = [p.detach().clone() for p in model.parameters()]
train_one_epoch(model, head, [(torch.randn(5, 4), torch.randn(5, 1))] * 2, optimizer)
MOVED = not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
'''


def _engine_project(root, params: str):  # type: ignore[no-untyped-def]
    (root / "engine.py").write_text(ENGINE.lstrip("\n"))
    (root / "main.py").write_text(MAIN.lstrip("\n").format(params=params))
    return root / "main.py"


def _gt438(path) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path.parent)], Settings()).findings
            if f.code == "GT438"]


def _moved(path, monkeypatch) -> bool:  # type: ignore[no-untyped-def]
    import runpy
    import sys
    monkeypatch.syspath_prepend(str(path.parent))
    try:
        return runpy.run_path(str(path))["MOVED"]
    finally:  # the project's `engine` must not stay imported for the next test
        sys.modules.pop("engine", None)


def test_module_handed_to_an_imported_trainer_in_the_optimizer_is_silent(
        tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _engine_project(tmp_path, "[*model.parameters(), *head.parameters()]")
    assert _gt438(path) == []
    assert _moved(path, monkeypatch)


def test_module_handed_to_an_imported_trainer_outside_the_optimizer_is_reported(
        tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _engine_project(tmp_path, "list(head.parameters())")
    assert _gt438(path) == [9]
    assert not _moved(path, monkeypatch)
