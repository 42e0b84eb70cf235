"""Readings of docs/triage/static26h.md (held-out 18 and 20 static misses, by mechanism), each
in spellings the real-world cases do not use, as a buggy twin that real torch fails on (or,
for a silent bug, runs and shows it) and a correct look-alike that runs; the checker reports
the first and stays silent on the second."""
from __future__ import annotations

import textwrap

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

LEAF_VIEW = (RuntimeError, "a view of a leaf Variable that requires grad")
LEAF = (RuntimeError, "a leaf Variable that requires grad")
SAVED = (RuntimeError, "modified by an inplace operation")

MF = '''
class MF(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.P = nn.Parameter(torch.randn(n, d))
        self.Q = nn.Parameter(torch.randn(n, d))
    def forward(self):
        return self.P @ self.Q.t()
'''



def mf(src: str) -> str:
    """The shape ``src`` after the module class ``MF`` (lines 1-7)."""
    return MF + textwrap.dedent(src).lstrip("\n")


SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT302: a closed-form solver writes a row into a Parameter of a module class of the file,
    # through the instance a trainer holds (revisit_adv_rec). Variant: an in-place method on
    # the Parameter through `self.net`. Look-alike: the same writes under no_grad
    "trainer-writes-parameter-of-held-model": (Shape(mf("""
        class Trainer:
            def __init__(self):
                self.net = MF(3, 2)
            def solve(self, rows):
                with torch.no_grad():
                    for u, r in enumerate(rows):
                        self.net.P[u] = r
                    self.net.Q.mul_(0.5)
        t = Trainer()
        t.solve(torch.randn(3, 2))
        """), "GT302", holds="bool((t.net.P.grad is None))"), Shape(mf("""
        class Trainer:
            def __init__(self):
                self.net = MF(3, 2)
            def shrink(self):
                self.net.Q.mul_(0.5)
        t = Trainer()
        t.shrink()
        """), "GT302", 12, raises=LEAF)),
    # GT302: the module's own method (not forward) writes a row of its Parameter, called by
    # the script with grad on. Look-alike: the method is decorated with @torch.no_grad()
    "own-method-writes-row-of-parameter": (Shape(mf("""
        class ALS(MF):
            @torch.no_grad()
            def refit_row(self, u, r):
                self.P[u] = r
        m = ALS(3, 2)
        m.refit_row(0, torch.zeros(2))
        """), "GT302", holds="float(m.P[0].abs().sum()) == 0.0"), Shape(mf("""
        class ALS(MF):
            def refit_row(self, u, r):
                self.P[u] = r
        m = ALS(3, 2)
        m.refit_row(0, torch.zeros(2))
        """), "GT302", 10, raises=LEAF_VIEW)),
    # GT302: a function of the file given the model writes a column view of its Parameter.
    # Look-alike: the write goes through `.data`
    "helper-writes-view-of-parameter": (Shape(mf("""
        def reset_first(model):
            model.P.data[:, 0] = 0.0
        net = MF(3, 2)
        reset_first(net)
        """), "GT302", holds="float(net.P[:, 0].abs().sum()) == 0.0"), Shape(mf("""
        net = MF(3, 2)
        net.P.t()[0] = 0.0
        """), "GT302", 9, raises=LEAF_VIEW)),
    # GT119: forward re-leafs each part of a submodule's output in a comprehension
    # (pytorch-forecasting TiDE): the submodule gets no gradient. Look-alike: the parts are
    # kept as they are
    "forward-releafs-submodule-output-parts": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
            def forward(self, x):
                return [p.clone() for p in self.enc(x).chunk(2, -1)]
        net = Net()
        sum(p.sum() for p in net(torch.randn(3, 4))).backward()
        """, "GT119", holds="net.enc.weight.grad is not None"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
            def forward(self, x):
                return [p.detach().requires_grad_() for p in self.enc(x).chunk(2, -1)]
        net = Net()
        sum(p.sum() for p in net(torch.randn(3, 4))).backward()
        """, "GT119", 6, holds="net.enc.weight.grad is None")),
    # GT119 variant: the re-leafed output is bound to a name and a head runs on it.
    # Look-alike: Grad-CAM keeps the leaf on self and the script reads its gradient
    "forward-releafs-submodule-output-for-head": (Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                self.feat = self.enc(x).detach().requires_grad_(True)
                return self.head(self.feat)
        net = Net()
        net(torch.randn(3, 4)).sum().backward()
        cam = net.feat.grad.abs()
        """, "GT119", holds="cam.shape == (3, 4)"), Shape("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                h = self.enc(x).detach().requires_grad_(True)
                return self.head(h)
        net = Net()
        net(torch.randn(3, 4)).sum().backward()
        """, "GT119", 7, holds="net.enc.weight.grad is None and net.head.weight.grad is not None")),
    # GT521: `__init__` stacks two Parameters into the tensor forward uses (kornia
    # DTranslation): the Parameters move, the stacked value never does. Look-alike: the
    # Parameters kept in a ParameterList, the stack made in forward
    "init-stacks-parameters": (Shape("""
        class Shift(nn.Module):
            def __init__(self):
                super().__init__()
                self.dx = nn.Parameter(torch.zeros(1))
                self.dy = nn.Parameter(torch.zeros(1))
                self.both = nn.ParameterList([self.dx, self.dy])
            def forward(self, pts):
                return pts + torch.stack([self.dx, self.dy], 1)
        m = Shift()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            (m(torch.ones(3, 2)) - 2).pow(2).sum().backward()
            opt.step()
        """, "GT521", holds="float(m(torch.zeros(1, 2)).abs().sum()) > 0"), Shape("""
        class Shift(nn.Module):
            def __init__(self):
                super().__init__()
                self.dx = nn.Parameter(torch.zeros(1))
                self.dy = nn.Parameter(torch.zeros(1))
                self.shift = torch.stack([self.dx, self.dy], 1)
            def forward(self, pts):
                return pts + self.shift
        m = Shift()
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            (m(torch.ones(3, 2)) - 2).pow(2).sum().backward()
            opt.step()
        """, "GT521", 6, holds="float(m.dx) != 0.0 and float(m(torch.zeros(1, 2)).abs().sum()) == 0")),
    # GT521 variant: `torch.cat` of a tuple of computed values (exp saves its result): the
    # second backward raises. Look-alike: the same cat in forward
    "init-concatenates-computed-parameters": (Shape("""
        class Scales(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Parameter(torch.zeros(2))
                self.b = nn.Parameter(torch.zeros(2))
            def forward(self, x):
                return x * torch.cat((self.a.exp(), self.b.exp()))
        m = Scales()
        for _ in range(2):
            m(torch.ones(4)).sum().backward()
        """, "GT521", holds="float(m.a.grad.sum()) == 4.0"), Shape("""
        class Scales(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Parameter(torch.zeros(2))
                self.b = nn.Parameter(torch.zeros(2))
                self.scales = torch.cat((self.a.exp(), self.b.exp()))
            def forward(self, x):
                return x * self.scales
        m = Scales()
        for _ in range(2):
            m(torch.ones(4)).sum().backward()
        """, "GT521", 6, raises=(RuntimeError, "backward through the graph a second time"))),
    # GT603: forward slices a submodule's output (a ReLU saved it) and divides the slice in
    # place (nflows' spline parameters). Variant: the write reaches it through `.view(...)`
    # chained on the call. Look-alike: the slice cloned first
    "slice-of-relu-output-divided-in-place": (Shape("""
        class Coupling(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            def forward(self, x):
                params = self.net(x)
                widths = params[..., :4].clone()
                widths /= 2.0
                return widths.sum() + params.sum()
        Coupling()(torch.randn(3, 4)).backward()
        """, "GT603"), Shape("""
        class Coupling(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            def forward(self, x):
                params = self.net(x)
                widths = params[..., :4]
                widths /= 2.0
                return widths.sum() + params.sum()
        Coupling()(torch.randn(3, 4)).backward()
        """, "GT603", 8, raises=SAVED)),
    "view-of-relu-output-scaled-in-place": (Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            def forward(self, x):
                h = self.net(x).view(3, 2, 4)
                h = h * 2.0
                return h.sum()
        Head()(torch.randn(3, 4)).backward()
        """, "GT603"), Shape("""
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            def forward(self, x):
                h = self.net(x).view(3, 2, 4)
                h *= 2.0
                return h.sum()
        Head()(torch.randn(3, 4)).backward()
        """, "GT603", 7, raises=SAVED)),
    # GT214: a module whose forward runs under @torch.no_grad() has a submodule unfrozen by a
    # helper given the module (TinyLLaVA's vision tower): the submodule never gets a gradient.
    # Variant: `model.tower.vit.requires_grad_(True)` through the owner. Look-alike: the script
    # unfreezes a submodule of the other model, whose forward records
    "helper-unfreezes-submodule-of-no-grad-forward": (Shape("""
        class Tower(nn.Module):
            def __init__(self):
                super().__init__()
                self.vit = nn.Linear(4, 4)
                self.vit.requires_grad_(False)
            @torch.no_grad()
            def forward(self, x):
                return self.vit(x)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.tower = Tower()
                self.head = nn.Linear(4, 1)
                self.head.requires_grad_(False)
            def forward(self, x):
                return self.head(self.tower(x))
        model = Model()
        model.head.requires_grad_(True)
        model(torch.randn(3, 4)).sum().backward()
        """, "GT214", holds="model.head.weight.grad is not None"), Shape("""
        class Tower(nn.Module):
            def __init__(self):
                super().__init__()
                self.vit = nn.Linear(4, 4)
                self.vit.requires_grad_(False)
            @torch.no_grad()
            def forward(self, x):
                return self.vit(x)
        def unlock(tower):
            for p in tower.vit.parameters():
                p.requires_grad = True
        tower = Tower()
        unlock(tower)
        head = nn.Linear(4, 1)
        head(tower(torch.randn(3, 4))).sum().backward()
        """, "GT214", 6, holds="tower.vit.weight.grad is None")),
    "owner-unfreezes-submodule-of-no-grad-forward": (Shape("""
        class Tower(nn.Module):
            def __init__(self):
                super().__init__()
                self.vit = nn.Linear(4, 4)
                self.vit.requires_grad_(False)
            @torch.no_grad()
            def forward(self, x):
                return self.vit(x)
        tower = Tower()
        head = nn.Linear(4, 1)
        head(tower(torch.randn(3, 4))).sum().backward()
        """, "GT214", holds="head.weight.grad is not None"), Shape("""
        class Tower(nn.Module):
            def __init__(self):
                super().__init__()
                self.vit = nn.Linear(4, 4)
                self.vit.requires_grad_(False)
            @torch.no_grad()
            def forward(self, x):
                return self.vit(x)
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.tower = Tower()
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                return self.head(self.tower(x))
        model = Model()
        model.tower.vit.requires_grad_(True)
        model(torch.randn(3, 4)).sum().backward()
        """, "GT214", 6, holds="model.tower.vit.weight.grad is None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
