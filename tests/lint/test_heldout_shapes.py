"""Shapes from the held-out real-world batch (docs/triage/heldout.md), run on real torch.

Each entry: a look-alike that must stay silent and train, and buggy twins in two or more
spellings (a function, a method, a script, a helper one call away) that must be reported on
the given line and must really fail (or show the silent symptom) on torch.
"""
from __future__ import annotations

import textwrap
from typing import NamedTuple

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
"""


class Shape(NamedTuple):
    src: str
    code: str                  # the rule that must stay silent / fire
    line: int | None = None    # buggy twin: the line reported (1-based, after the prelude)
    raises: str | None = None  # buggy twin: what real torch raises
    holds: str | None = None   # an expression that must be true after running the snippet


SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # modules bound by tuple unpacking: `student(x)` runs a model, so a no-grad teacher target
    # next to it is a stop-gradient, not a dead loss
    "tuple-unpacked-modules": (Shape("""
        student, teacher = nn.Linear(4, 2), nn.Linear(4, 2)
        x = torch.randn(3, 4)
        with torch.no_grad():
            target = teacher(x)
        loss = F.mse_loss(student(x), target)
        loss.backward()
        """, "GT201", holds="student.weight.grad is not None"), [Shape("""
        student, teacher = nn.Linear(4, 2), nn.Linear(4, 2)
        x = torch.randn(3, 4)
        with torch.no_grad():
            out = student(x)
        loss = F.mse_loss(out, teacher(x).detach())
        loss.backward()
        """, "GT201", 3, "does not require grad"), Shape("""
        def train(x):
            net, head = nn.Linear(4, 4), nn.Linear(4, 2)
            with torch.no_grad():
                feats = head(net(x))
            loss = feats.pow(2).mean()
            loss.backward()
        train(torch.randn(3, 4))
        """, "GT201", 3, "does not require grad")]),
    # a value computed once before the loop from a requires-grad tensor through an operation
    # that saves tensors (labels from "true" weights, the whole forward pass of a script), or
    # returned by a helper that runs a module: the second backward finds its graph freed
    "graph-before-loop-from-leaf-or-helper": (Shape("""
        true_W = torch.randn(2, 1, requires_grad=True)
        X = torch.randn(20, 2)
        with torch.no_grad():
            Y = torch.mm(X, true_W)
        W = torch.zeros(2, 1, requires_grad=True)
        shift = W + 1
        for i in range(0, 20, 5):
            loss = ((X[i:i + 5] @ W - Y[i:i + 5]) ** 2).mean() + shift.sum()
            loss.backward()
        """, "GT507", holds="W.grad is not None"), [Shape("""
        true_W = torch.randn(2, 1, requires_grad=True)
        X = torch.randn(20, 2)
        Y = torch.mm(X, true_W)
        W = torch.zeros(2, 1, requires_grad=True)
        for i in range(0, 20, 5):
            loss = ((X[i:i + 5] @ W - Y[i:i + 5]) ** 2).mean()
            loss.backward()
        """, "GT507", 3, "backward through the graph a second time"), Shape("""
        W = torch.randn(5, 3, requires_grad=True)
        x = F.one_hot(torch.tensor([0, 2, 4]), 5).float()
        probs = (x @ W).exp()
        loss = -(probs / probs.sum(1, keepdim=True)).log().mean()
        for k in range(3):
            W.grad = None
            loss.backward()
            W.data += -0.1 * W.grad
        """, "GT507", 4, "backward through the graph a second time"), Shape("""
        encoder = nn.Linear(4, 4)
        def embed(x):
            return encoder(x).mean(0)
        def fit(x, head, opt):
            cond = embed(x)
            for _ in range(2):
                loss = head(cond).pow(2).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
        head = nn.Linear(4, 1)
        fit(torch.randn(3, 4), head, torch.optim.SGD(head.parameters(), lr=0.1))
        """, "GT507", 5, "backward through the graph a second time")]),
    # a module copies its own parameters into a new tensor in forward: they never train
    "parameters-rebuilt-in-forward": (Shape("""
        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(3)])
                self.eps = 1e-6
            def forward(self, x):
                return x * torch.stack(list(self.scales)).view(-1) + torch.tensor(self.eps)
        m = Scale()
        m(torch.randn(2, 3)).sum().backward()
        """, "GT110", holds="m.scales[0].grad is not None"), [Shape("""
        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(3)])
                self.proj = nn.Linear(3, 3)
            def forward(self, x):
                return self.proj(x) * torch.Tensor([p for p in self.scales])
        m = Scale()
        m(torch.randn(2, 3)).sum().backward()
        """, "GT110", 7, holds="m.scales[0].grad is None and m.proj.weight.grad is not None"),
        Shape("""
        class Mix(nn.Module):
            def __init__(self):
                super().__init__()
                self.alpha = nn.Parameter(torch.tensor(0.5))
                self.beta = nn.Parameter(torch.tensor(0.5))
                self.proj = nn.Linear(2, 2)
            def weights(self):
                return torch.tensor([self.alpha, self.beta])
            def forward(self, x):
                return self.proj(x) * self.weights()
        m = Mix()
        m(torch.randn(4, 2)).sum().backward()
        """, "GT110", 8, holds="m.alpha.grad is None and m.proj.weight.grad is not None")]),
    # a method of a submodule re-creates its own parameter (or layer) after the optimizer was
    # built over the model: the optimizer keeps stepping the old tensor
    "method-recreates-own-parameter-after-optimizer": (Shape("""
        class Quant(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(1))
            def init_range(self, lo, hi):
                with torch.no_grad():
                    self.scale.copy_(torch.max(lo.abs(), hi.abs()).reshape(1))
            def forward(self, x):
                return x * self.scale
        model = nn.Sequential(nn.Linear(3, 3), Quant())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model[1].init_range(torch.tensor(-2.), torch.tensor(3.))
        before = model[1].scale.detach().clone()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
        """, "GT404", holds="not torch.equal(before, model[1].scale.detach())"), [Shape("""
        class Quant(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(1))
            def init_range(self, lo, hi):
                self.scale = nn.Parameter(torch.max(lo.abs(), hi.abs()).reshape(1))
            def forward(self, x):
                return x * self.scale
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                self.quant = Quant()
            def forward(self, x):
                return self.quant(self.fc(x))
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.quant.init_range(torch.tensor(-2.), torch.tensor(3.))
        before = model.quant.scale.detach().clone()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
        """, "GT404", 6, holds="torch.equal(before, model.quant.scale.detach())"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 2)
            def reset(self, n):
                self.fc = nn.Linear(3, n)
            def forward(self, x):
                return self.fc(x)
        def train(x):
            head = Head()
            opt = torch.optim.SGD(head.parameters(), lr=0.1)
            head.reset(2)
            before = head.fc.weight.detach().clone()
            head(x).pow(2).sum().backward()
            opt.step()
            return torch.equal(before, head.fc.weight.detach())
        unchanged = train(torch.randn(4, 3))
        """, "GT404", 6, holds="unchanged")]),
    # sqrt of a sum of squared coordinate differences, two helpers away from the backward
    "sqrt-of-squared-coordinate-differences": (Shape("""
        def side(x1, y1, x2, y2):
            return torch.sqrt((y2 - y1).square() + (x2 - x1).square() + 1e-12)
        def perimeter(p):
            return side(p[0, 0], p[0, 1], p[1, 0], p[1, 1]) + side(p[1, 0], p[1, 1], p[1, 0], p[1, 1])
        p = torch.tensor([[0., 0.], [1., 1.]], requires_grad=True)
        perimeter(p).backward()
        """, "GT753", holds="torch.isfinite(p.grad).all()"), [Shape("""
        def side(x1, y1, x2, y2):
            return torch.sqrt((y2 - y1).square() + (x2 - x1).square())
        def perimeter(p):
            return side(p[0, 0], p[0, 1], p[1, 0], p[1, 1]) + side(p[1, 0], p[1, 1], p[1, 0], p[1, 1])
        p = torch.tensor([[0., 0.], [1., 1.]], requires_grad=True)
        perimeter(p).backward()
        """, "GT753", 2, holds="torch.isnan(p.grad).any()"), Shape("""
        def edge_loss(a, b):
            return torch.sqrt((b[:, 0] - a[:, 0]) ** 2 + (b[:, 1] - a[:, 1]) ** 2).mean()
        a = torch.zeros(2, 2, requires_grad=True)
        edge_loss(a, torch.tensor([[0., 0.], [1., 1.]])).backward()
        """, "GT753", 2, holds="torch.isnan(a.grad).any()")]),
}


def _source(shape: Shape) -> str:
    return PRELUDE + textwrap.dedent(shape.src).lstrip("\n")


def _found(shape: Shape) -> list[tuple[int, str]]:
    found = check_source(_source(shape), "shape.py", select=[shape.code])
    offset = PRELUDE.count("\n")
    return sorted((f.line - offset, f.code) for f in found)


def _run(shape: Shape) -> dict:
    env: dict = {}
    if shape.raises:
        with pytest.raises((RuntimeError, TypeError, KeyError, IndexError), match=shape.raises):
            exec(compile(_source(shape), "shape.py", "exec"), env)
    else:
        exec(compile(_source(shape), "shape.py", "exec"), env)
    if shape.holds:
        assert eval(shape.holds, env)
    return env


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)
