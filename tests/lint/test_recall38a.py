"""The facts of docs/triage/recall38a.md (session 38). Each pair is a correct shape the checker
must leave alone and a buggy twin it must report on its line, written in other names and shapes
than the real-world cases; every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import itertools
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

NON_LEAF = (ValueError, "can't optimize a non-leaf Tensor")

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT306: `itertools.chain(*gen)` flattens what it is given one level; given the parameter
    # generators of several parts (a list of generators, starred) it yields the parameters.
    # Twin: the star is on one module's parameters, so chain iterates each Parameter: rows
    "parameters-chained-through-a-star": (Shape("""
        encoder, head = nn.Linear(3, 5), nn.Linear(5, 2)
        temperature = torch.ones((), requires_grad=True)
        groups = [encoder.parameters(), head.parameters()]
        opt = torch.optim.Adam(itertools.chain(*groups, [temperature]), lr=0.01)
        loss = head(encoder(torch.randn(4, 3))).logsumexp(1).mean() / temperature
        loss.backward()
        opt.step()
        """, "GT306", holds="len(opt.param_groups[0]['params']) == 5"), Shape("""
        encoder, head = nn.Linear(3, 5), nn.Linear(5, 2)
        temperature = torch.ones((), requires_grad=True)
        params = itertools.chain(*encoder.parameters(), head.parameters(), [temperature])
        opt = torch.optim.Adam(params, lr=0.01)
        """, "GT306", line=3, raises=NON_LEAF)),
    # GT307 (NOTE [returned entries]): a helper returns a dict whose entry is computed from a
    # leaf that requires grad; reading that entry's `.grad` after backward gives None unless
    # the helper kept it with `retain_grad()`. Look-alike: the helper retains it
    "grad-of-a-returned-entry": (Shape("""
        def splat(points, cam):
            uv = (cam @ points.T).T
            uv = uv[:, :2] / uv[:, 2:]
            uv.retain_grad()
            return {"uv": uv, "depth": points[:, 2]}
        pts = (torch.randn(6, 3) + torch.tensor([0.0, 0.0, 5.0])).requires_grad_()
        out = splat(pts, torch.eye(3))
        out["uv"].pow(2).sum().backward()
        screen_grad = out["uv"].grad
        """, "GT307", holds="screen_grad is not None"), Shape("""
        def splat(points, cam):
            uv = (cam @ points.T).T
            uv = uv[:, :2] / uv[:, 2:]
            return uv.sum(), {"uv": uv, "depth": points[:, 2]}, None
        pts = (torch.randn(6, 3) + torch.tensor([0.0, 0.0, 5.0])).requires_grad_()
        total, out, _ = splat(pts, torch.eye(3))
        total.backward()
        screen_grad = out["uv"].grad
        """, "GT307", line=8, holds="screen_grad is None")),
    # GT309 (NOTE [tied parameters]): `assign=True` turns each state-dict entry into its own
    # Parameter, so a model that shares one Parameter between two submodules has two after
    # the load. Look-alike: the model ties them again with its own method after loading
    "assign-load-of-a-tied-model": (Shape("""
        class Codec(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(6, 3, bias=False)
                self.dec = nn.Linear(3, 6, bias=False)
                self.tie()
            def tie(self):
                self.dec.weight = self.enc.weight
        trained, fresh = Codec(), Codec()
        fresh.load_state_dict(trained.state_dict(), assign=True)
        fresh.tie()
        """, "GT309", holds="len(list(fresh.parameters())) == 1"), Shape("""
        class Shared(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.w = w
        class Codec(nn.Module):
            def __init__(self):
                super().__init__()
                w = nn.Parameter(torch.randn(6, 3))
                self.scale = w
                self.proj = Shared(w)
        trained, fresh = Codec(), Codec()
        fresh.load_state_dict(trained.state_dict(), assign=True)
        """, "GT309", line=12, holds="len(list(fresh.parameters())) == 2")),
    # GT220 (NOTE [grad-off part of a trained model]): the optimizer holds the whole model,
    # the trainer runs one of its submodules itself, only inside a `@torch.no_grad()` method.
    # Look-alike: that submodule is frozen on purpose, so running it without grad is right
    "grad-off-part-of-a-trained-model": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem, self.body = nn.Linear(4, 8), nn.Linear(8, 2)
        class Fitter:
            def __init__(self):
                self.net = Net()
                self.net.stem.requires_grad_(False)
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            @torch.no_grad()
            def features(self, x):
                return torch.relu(self.net.stem(x))
            def fit(self, x, y):
                loss = F.mse_loss(self.net.body(self.features(x)), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        fitter = Fitter()
        fitter.fit(torch.randn(5, 4), torch.randn(5, 2))
        """, "GT220", holds="fitter.net.body.weight.grad is not None"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem, self.body = nn.Linear(4, 8), nn.Linear(8, 2)
        class Fitter:
            def __init__(self):
                self.net = Net()
                self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
            @torch.no_grad()
            def features(self, x):
                return torch.relu(self.net.stem(x))
            def fit(self, x, y):
                loss = F.mse_loss(self.net.body(self.features(x)), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
        fitter = Fitter()
        fitter.fit(torch.randn(5, 4), torch.randn(5, 2))
        """, "GT220", line=9, holds="fitter.net.stem.weight.grad is None")),
    # GT308 (NOTE [names of the other kind]): a module never names a parameter and a buffer
    # alike, so a buffer loop kept to parameter names copies nothing. Look-alike: the names
    # are collected from the same kind the loop walks
    "names-of-the-other-kind": (Shape("""
        src, dst = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
        src(torch.randn(8, 3) * 4 + 2)
        def sync(a, b):
            floats = set(n for n, t in a.named_buffers() if t.is_floating_point())
            mine = dict(b.named_buffers())
            for n, t in a.named_buffers():
                if n in floats:
                    mine[n].copy_(t)
        sync(src, dst)
        """, "GT308", holds="torch.equal(src.running_mean, dst.running_mean)"), Shape("""
        src, dst = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
        src(torch.randn(8, 3) * 4 + 2)
        def sync(a, b):
            floats = set(n for n, t in a.named_parameters() if t.is_floating_point())
            mine = dict(b.named_buffers())
            for n, t in a.named_buffers():
                if n in floats:
                    mine[n].copy_(t)
        sync(src, dst)
        """, "GT308", line=6, holds="not torch.equal(src.running_mean, dst.running_mean)")),
    # GT415 (NOTE [raw copy left registered]): a weight-drop wrapper copies each weight of the
    # wrapped layer under a new name and sets the dropped-out tensor back on the old name each
    # forward. Look-alike: the copy deletes the original slot first, so the set is allowed
    "raw-copy-left-registered": (Shape("""
        class DropConnect(nn.Module):
            def __init__(self, inner, names=("weight",), p=0.2):
                super().__init__()
                self.inner, self.names, self.p = inner, list(names), p
                for n in self.names:
                    orig = getattr(self.inner, n)
                    del self.inner._parameters[n]
                    self.inner.register_parameter(n + "_orig", nn.Parameter(orig.detach().clone()))
            def forward(self, x):
                for n in self.names:
                    setattr(self.inner, n, F.dropout(getattr(self.inner, n + "_orig"), self.p, True))
                return self.inner(x)
        layer = DropConnect(nn.Linear(4, 3))
        layer(torch.randn(2, 4)).sum().backward()
        """, "GT415", holds="layer.inner.weight_orig.grad is not None"), Shape("""
        class DropConnect(nn.Module):
            def __init__(self, inner, names=("weight",), p=0.2):
                super().__init__()
                self.inner, self.names, self.p = inner, list(names), p
                for n in self.names:
                    orig = getattr(self.inner, n)
                    self.inner.register_parameter(n + "_orig", nn.Parameter(orig.detach().clone()))
            def forward(self, x):
                for n in self.names:
                    setattr(self.inner, n, F.dropout(getattr(self.inner, n + "_orig"), self.p, True))
                return self.inner(x)
        layer = DropConnect(nn.Linear(4, 3))
        layer(torch.randn(2, 4)).sum().backward()
        """, "GT415", line=7, raises=(TypeError, "cannot assign"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
