"""Shapes that fired wrongly on the projects of docs/triage/unseen13.md (session 13:
TorchSSL, graph_nets, pytorch-YOLOv4, pytorch_image_classification), each in another
spelling than the project's and next to a buggy twin that is still reported. Every snippet
runs on real torch. Code "of another file" is a module the prelude puts in ``sys.modules``."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import sys
import types
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", DeprecationWarning)
_elsewhere = types.ModuleType("elsewhere13")
exec("""
import torch.nn.functional as F
def alignment_loss(strong, weak, prior):
    probs = weak.detach().softmax(-1)
    prior = probs.mean(0) if prior is None else 0.9 * prior + 0.1 * probs.mean(0)
    return -(strong.log_softmax(-1) * probs / prior).sum(-1).mean(), prior
""", _elsewhere.__dict__)
sys.modules["elsewhere13"] = _elsewhere
'''
TWICE = (RuntimeError, "backward through the graph a second time")
LEGACY = (RuntimeError, "Legacy autograd function")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # TorchSSL's FreeMatch: `time_p, p_model, label_hist = self.cal_time_p_and_p_model(
    # logits_w, time_p, p_model, label_hist)`, a method decorated `@torch.no_grad()`: what it
    # returns has no history, so carrying it into the next pass carries no graph. Twin: the
    # same helper without the decorator; the second backward reaches the first pass's graph
    "running-statistic-made-under-no-grad": (Shape("""
        from torch import no_grad
        class Tracker:
            def __init__(self, net):
                self.net, self.opt = net, torch.optim.SGD(net.parameters(), lr=0.1)
            @no_grad()
            def update(self, out, prior):
                if prior is None:
                    prior = out.softmax(-1).mean(0)
                else:
                    prior = prior * 0.9 + out.softmax(-1).mean(0) * 0.1
                return prior
            def fit(self, steps):
                prior = None
                for _ in range(steps):
                    out = self.net(torch.randn(5, 4))
                    prior = self.update(out, prior)
                    loss = -(out.log_softmax(-1) * prior).sum(-1).mean()
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                return prior
        prior = Tracker(nn.Linear(4, 3)).fit(3)
        """, "GT506", holds="prior.grad_fn is None"), Shape("""
        from torch import no_grad
        class Tracker:
            def __init__(self, net):
                self.net, self.opt = net, torch.optim.SGD(net.parameters(), lr=0.1)
            def update(self, out, prior):
                if prior is None:
                    prior = out.softmax(-1).mean(0)
                else:
                    prior = prior * 0.9 + out.softmax(-1).mean(0) * 0.1
                return prior
            def fit(self, steps):
                prior = None
                for _ in range(steps):
                    out = self.net(torch.randn(5, 4))
                    prior = self.update(out, prior)
                    loss = -(out.log_softmax(-1) * prior).sum(-1).mean()
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                return prior
        prior = Tracker(nn.Linear(4, 3)).fit(3)
        """, "GT506", 15, raises=TWICE)),
    # the same in FreeMatch's spelling of the call: a method returning a tuple, each element
    # rebound in it on every path. Twin: the method without the decorator
    "tuple-of-a-no-grad-method": (Shape("""
        class Learner:
            def __init__(self):
                self.net = nn.Linear(4, 3)
                self.opt = torch.optim.Adam(self.net.parameters())
            @torch.no_grad()
            def stats(self, logits, level, hist):
                probs = logits.softmax(1)
                level = probs.max(1)[0].mean() if level is None else 0.99 * level + 0.01 * probs.max(1)[0].mean()
                hist = probs.mean(0) if hist is None else 0.99 * hist + 0.01 * probs.mean(0)
                return level, hist
            def fit(self, batches):
                level, hist = None, None
                for x in batches:
                    logits = self.net(x)
                    level, hist = self.stats(logits, level, hist)
                    loss = (logits.softmax(1) * hist).sum(1).mean() * level
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                return hist
        hist = Learner().fit([torch.randn(6, 4) for _ in range(3)])
        """, "GT506", holds="hist.grad_fn is None"), Shape("""
        class Learner:
            def __init__(self):
                self.net = nn.Linear(4, 3)
                self.opt = torch.optim.Adam(self.net.parameters())
            def stats(self, logits, level, hist):
                probs = logits.softmax(1)
                level = probs.max(1)[0].mean() if level is None else 0.99 * level + 0.01 * probs.max(1)[0].mean()
                hist = probs.mean(0) if hist is None else 0.99 * hist + 0.01 * probs.mean(0)
                return level, hist
            def fit(self, batches):
                level, hist = None, None
                for x in batches:
                    logits = self.net(x)
                    level, hist = self.stats(logits, level, hist)
                    loss = (logits.softmax(1) * hist).sum(1).mean() * level
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                return hist
        hist = Learner().fit([torch.randn(6, 4) for _ in range(3)])
        """, "GT506", 14, raises=TWICE)),
    # graph_nets' ChebNet notebook: `my_sparse_mm()(L, x0)` in `graph_conv_cheby`, an old-style
    # `torch.autograd.Function` (it defines `forward`, and holds no weight): a legacy call that
    # GT705 reports, not a layer with random weights. Twin: a module of the file with a
    # Linear is built in the helper `forward` calls; `parameters()` never holds it
    "legacy-function-built-in-a-helper": (Shape("""
        from torch.autograd import Function as AF
        class SparseProduct(AF):
            def forward(self, a, b):
                self.save_for_backward(a, b)
                return a @ b
            def backward(self, g):
                a, b = self.saved_tensors
                return g @ b.t(), a.t() @ g
        class Propagate(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
            def hop(self, adj, h):
                return SparseProduct()(adj, h)
            def forward(self, adj, h):
                return self.lin(self.hop(adj, h))
        model = Propagate()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.eye(3), torch.randn(3, 4)).sum().backward()
        """, "GT420", raises=LEGACY), Shape("""
        class Mix(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Linear(4, 4)
            def forward(self, adj, h):
                return adj @ self.w(h)
        class Propagate(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
            def hop(self, adj, h):
                return Mix()(adj, h)
            def forward(self, adj, h):
                return self.lin(self.hop(adj, h))
        model = Propagate()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.eye(3), torch.randn(3, 4)).sum().backward()
        """, "GT420", 12, holds="len(list(model.parameters())) == 2")),
    # pytorch-YOLOv4's `Darknet.forward`: in the loop over the blocks, `x = x1 + x2`, then
    # `if activation == 'leaky': x = F.leaky_relu(x, 0.1, inplace=True)` / `elif ...:
    # x = F.relu(x, inplace=True)`: each pass binds `x` anew before either arm, so the write
    # never reaches a previous pass's output. Twin: the new binding is only in the first arm;
    # the next pass clamps the tanh's output in place and backward raises
    "inplace-arm-after-a-fresh-binding-in-a-loop": (Shape("""
        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.kinds = ["tanh", "relu", "tanh"]
                self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in self.kinds)
            def forward(self, h):
                for kind, layer in zip(self.kinds, self.layers):
                    h = layer(h) + h
                    if kind == "tanh":
                        h = torch.tanh(h)
                    else:
                        h.clamp_(min=0)
                return h
        Stack()(torch.randn(2, 4)).sum().backward()
        """, "GT602"), Shape("""
        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.kinds = ["tanh", "relu", "tanh"]
                self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in self.kinds)
            def forward(self, h):
                for kind, layer in zip(self.kinds, self.layers):
                    if kind == "tanh":
                        h = torch.tanh(layer(h) + h)
                    else:
                        h.clamp_(min=0)
                return h
        Stack()(torch.randn(2, 4)).sum().backward()
        """, "GT602", 11, raises=(RuntimeError, "modified by an inplace operation"))),
    # pytorch_image_classification's `train.py`: `losses = []` for each batch, then one
    # `loss.backward()` per sub-batch with `losses.append(loss)`, `optimizer.step()` after the
    # sub-batch loop and `sum(losses).item()` logged: the list holds one update's nodes and
    # is dropped at the next batch. Twin: the list is made once, before the batch loop; it
    # keeps every update's graph nodes for the whole run
    "micro-batch-losses-of-one-update": (Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        batches = [torch.randn(6, 4) for _ in range(3)]
        for x in batches:
            parts = []
            for piece in x.chunk(3):
                part = model(piece).pow(2).mean() / 3
                part.backward()
                parts.append(part)
            opt.step()
            opt.zero_grad()
            logged = torch.stack(parts).sum().item()
        """, "GT505", holds="len(parts) == 3"), Shape("""
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        batches = [torch.randn(6, 4) for _ in range(3)]
        parts = []
        for x in batches:
            for piece in x.chunk(3):
                part = model(piece).pow(2).mean() / 3
                part.backward()
                parts.append(part)
            opt.step()
            opt.zero_grad()
            logged = torch.stack(parts).sum().item()
        """, "GT505", 9, holds="len(parts) == 9 and parts[0].grad_fn is not None")),
    # TorchSSL's FlexMatch: `unsup_loss, mask, select, pseudo_lb, p_model =
    # consistency_loss(..., p_model, ...)` from `.flexmatch_utils`, which computes `p_model`
    # from `logits_w.detach()`: a loss of another file; its name speaks of its first result,
    # the by-products are that file's business (NOTE [foreign functions]). Twin: the same
    # function in this file, without the detach; the second backward reaches the first graph
    "by-product-of-a-loss-of-another-file": (Shape("""
        from elsewhere13 import alignment_loss
        net = nn.Linear(4, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        prior = None
        for _ in range(3):
            out = net(torch.randn(5, 4))
            loss, prior = alignment_loss(out, out, prior)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT506", holds="prior.grad_fn is None"), Shape("""
        def alignment_loss(strong, weak, prior):
            probs = weak.softmax(-1)
            prior = probs.mean(0) if prior is None else 0.9 * prior + 0.1 * probs.mean(0)
            return -(strong.log_softmax(-1) * probs / prior).sum(-1).mean(), prior
        net = nn.Linear(4, 3)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        prior = None
        for _ in range(3):
            out = net(torch.randn(5, 4))
            loss, prior = alignment_loss(out, out, prior)
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT506", 10, raises=TWICE)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
