"""Readings of docs/triage/static25a.md, each in spellings the real-world cases do not use, as a
buggy twin that real torch fails on (or that leaves a weight unchanged) and a correct look-alike
that runs; the checker reports the first and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

MODIFIED = (RuntimeError, "modified by an inplace operation")

GROW = '''
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(10, 4)
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.out = nn.Linear(4, 3)
    def grow_vocab(self, n):
        fresh = nn.Embedding(n, 4)
        fresh.weight.data[:10] = self.encoder.tok.weight.data
        self.encoder.tok = fresh
    def forward(self, ids):
        return self.out(self.encoder.tok(ids))
'''

HEADS = '''
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.heads = nn.ModuleDict()
    def forward(self, x, task=None):
        x = self.fc(x)
        return self.heads[task](x) if task else x
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList([Block(), Block()])
        self.task = None
    def add_task(self, name):
        for stage in self.stages:
            stage.heads[name] = nn.Linear(4, 4)
        self.task = name
    def forward(self, x):
        for stage in self.stages:
            x = stage(x, self.task)
        return x
'''

KNN = """
class Graph:
    @staticmethod
    def neighbours(feats):
        arr = feats.cpu().numpy()
        return (arr @ arr.T).argsort(1)[:, :2].tolist()
    @staticmethod
    def build(feats):
        return torch.tensor(Graph.neighbours(feats))
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)
    def forward(self, x):
        h = F.relu(self.embed(x))
        nbrs = Graph.build(NEIGHBOURS)
        return self.out(h[nbrs].mean(1))
net = Net()
net(torch.randn(6, 4)).sum().backward()
"""


TRANSFORM = """
class Base:
    def __call__(self, x):
        return self.forward_map(x)
class ToSimplex(Base):
    def inverse(self, y):
        return y.log()
    def forward_map(self, x):
        e = (x - x.max(-1, keepdim=True)[0]).exp()
        NORMALIZE
        return e
logits = torch.zeros(3, requires_grad=True)
to_simplex = ToSimplex()
w = to_simplex(logits)
(w * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
"""

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT404 through a method of the file that builds a new layer into a local name and assigns
    # it into a submodule (`resize_token_embeddings`), called on the unwrapped model after the
    # optimizer is built. Look-alike: the vocabulary grows first
    "method-assigns-local-new-layer-after-optimizer": (Shape(GROW + '''
def fit(model, ids, y):
    core = model.module if hasattr(model, "module") else model
    core.grow_vocab(12)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    before = model.encoder.tok.weight.detach().clone()
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(ids), y).backward()
        opt.step()
    return (model.encoder.tok.weight - before).abs().max().item()
moved = fit(Tagger(), torch.randint(0, 12, (6,)), torch.randint(0, 3, (6,)))
''', "GT404", holds="moved > 0"), Shape(GROW + '''
def fit(model, ids, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    core = model.module if hasattr(model, "module") else model
    core.grow_vocab(12)
    before = model.encoder.tok.weight.detach().clone()
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(ids), y).backward()
        opt.step()
    return (model.encoder.tok.weight - before).abs().max().item()
moved = fit(Tagger(), torch.randint(0, 12, (6,)), torch.randint(0, 3, (6,)))
''', "GT404", 20, holds="moved == 0")),
    # GT404 through a method that puts a new layer into a ModuleDict of each of its own blocks
    # (`add_adapter`). Look-alike: the optimizer is built after the heads are added
    "method-adds-dict-heads-after-optimizer": (Shape(HEADS + '''
net = Net()
net.add_task("ner")
opt = torch.optim.Adam(net.parameters(), lr=0.1)
w0 = net.stages[0].heads["ner"].weight.detach().clone()
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(5, 4)).pow(2).mean().backward()
    opt.step()
moved = (net.stages[0].heads["ner"].weight - w0).abs().max().item()
''', "GT404", holds="moved > 0"), Shape(HEADS + '''
net = Net()
opt = torch.optim.Adam(net.parameters(), lr=0.1)
net.add_task("ner")
w0 = net.stages[0].heads["ner"].weight.detach().clone()
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(5, 4)).pow(2).mean().backward()
    opt.step()
moved = (net.stages[0].heads["ner"].weight - w0).abs().max().item()
''', "GT404", 25, holds="moved == 0")),
    # GT602 from a local activation module whose calling line names no op (`gate(h)`).
    # Look-alike: the write goes into a clone
    "local-sigmoid-module-output-masked": (Shape("""
        def step(x):
            lin = nn.Linear(4, 4)
            gate = nn.Sigmoid()
            h = gate(lin(x))
            h = h.clone()
            h[h < 0.5] = 0
            h.sum().backward()
            return lin.weight.grad
        g = step(torch.randn(8, 4))
        """, "GT602", holds="g is not None"), Shape("""
        def step(x):
            lin = nn.Linear(4, 4)
            gate = nn.Sigmoid()
            h = gate(lin(x))
            h[h < 0.5] = 0
            h.sum().backward()
            return lin.weight.grad
        g = step(torch.randn(8, 4))
        """, "GT602", 5, raises=MODIFIED)),
    # GT602 from a local Sequential ending in Softmax, clamped in place in a script.
    # Look-alike: the head ends in LogSoftmax's out-of-place use (`.clamp`)
    "local-softmax-head-clamped": (Shape("""
        lin = nn.Linear(4, 4)
        head = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=-1))
        p = head(lin(torch.randn(2, 4)))
        p = p.clamp(1e-3, 1.0)
        p.log().sum().backward()
        """, "GT602", holds="lin.weight.grad is not None"), Shape("""
        lin = nn.Linear(4, 4)
        head = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=-1))
        p = head(lin(torch.randn(2, 4)))
        p.clamp_(1e-3, 1.0)
        p.log().sum().backward()
        """, "GT602", 4, raises=MODIFIED)),
    # GT602 look-alike: the local module's input is a new tensor (nothing recorded)
    "local-sigmoid-on-data": (Shape("""
        gate = nn.Sigmoid()
        w = nn.Parameter(torch.ones(3))
        m = gate(torch.randn(3))
        m[m < 0.5] = 0
        (w * m).sum().backward()
        """, "GT602", holds="w.grad is not None"), Shape("""
        gate = nn.Sigmoid()
        w = nn.Parameter(torch.ones(3))
        m = gate(w * 2)
        m[m < 0.5] = 0
        m.sum().backward()
        """, "GT602", 4, raises=MODIFIED)),
    # GT116 two calls down from a module's forward (run by `net(x)`): a static helper turns
    # its argument into NumPy; the forward passes a layer's output through `F.relu`.
    # Look-alike: the forward passes it detached
    "forward-hands-learned-features-to-numpy-helper": (
        Shape(KNN.replace("NEIGHBOURS", "h.detach()"), "GT116"),
        Shape(KNN.replace("NEIGHBOURS", "h"), "GT116", 4, raises=(RuntimeError, "requires grad"))),
    # GT116 look-alike: a lambda's parameter shares its name with a script global that
    # requires grad; the lambda is given detached values
    "lambda-parameter-shadows-graph-global": (Shape("""
        class Score:
            def __init__(self):
                self.fn = lambda pred: pred.numpy().mean()
        net = nn.Linear(3, 1)
        pred = net(torch.randn(4, 3))
        score = Score()
        print(score.fn(pred.detach()))
        """, "GT116"), Shape("""
        class Score:
            def __init__(self):
                self.fn = lambda out: pred.numpy().mean()
        net = nn.Linear(3, 1)
        pred = net(torch.randn(4, 3))
        score = Score()
        print(score.fn(pred.detach()))
        """, "GT116", 3, raises=(RuntimeError, "requires grad"))),
    # GT602 in a method of a plain class that an inherited `__call__` runs, the instance
    # called before a backward (a distributions-style transform normalizing exp in place).
    # Look-alike: the normalization is out of place
    "transform-method-divides-exp-in-place": (
        Shape(TRANSFORM.replace("NORMALIZE", "e = e / e.sum(-1, keepdim=True)"), "GT602"),
        Shape(TRANSFORM.replace("NORMALIZE", "e /= e.sum(-1, keepdim=True)"), "GT602", 9,
              raises=MODIFIED)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
