"""The static fact widened for held-out batch 39 (docs/triage/ho39.md): GT464 also knows a
module that builds its parameters behind a first-call flag of its own (NOTE [built behind a
first-call flag]), as a buggy twin reported on the building line and silent look-alikes, in
other spellings than the case's. Every snippet runs on real torch, and ``holds`` / ``raises``
check what the finding claims."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
torch.manual_seed(0)
'''

_FLAGGED = """
        class Mixer(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.width = width
                self.n_in = 0
                self.out = nn.Linear(width, 1)
            def _allocate(self):
                self.gate = nn.Parameter(torch.ones(self.n_in, self.width))
                self.scale = nn.Parameter(torch.ones(self.width))
            def forward(self, x):
                if self.n_in == 0:
                    self.n_in = x.shape[-1]
                    self._allocate()
                return self.out((x @ self.gate) * self.scale)
    """

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT464: the guard's block sets the attribute its test reads (it runs once), and calls a
    # method that creates Parameters: built after the optimizer, which never holds them. The
    # look-alike runs a dry forward before building the optimizer
    "parameters-built-behind-a-first-call-flag": (Shape(_FLAGGED + """
        net = Mixer(3)
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        net(torch.randn(2, 5)).sum().backward()
        held = {id(p) for g in opt.param_groups for p in g["params"]}
        """, "GT464", line=13,
        holds="id(net.gate) not in held and net.gate.grad is not None"), Shape(_FLAGGED + """
        net = Mixer(3)
        net(torch.zeros(1, 5))  # a dry run builds the parameters first
        opt = torch.optim.Adam(net.parameters(), lr=0.1)
        held = {id(p) for g in opt.param_groups for p in g["params"]}
        """, "GT464", holds="id(net.gate) in held")),
    # GT464: the whole model is built lazily by a flag (`if not self.ready`): the optimizer
    # gets nothing and torch raises. The look-alike's flagged block only caches a plain
    # tensor (no parameter), its layer built in __init__
    "whole-model-behind-a-flag": (Shape("""
        class Cell(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.n = n
                self.ready = False
            def build(self, d):
                self.w = nn.Parameter(torch.randn(d, self.n))
            def forward(self, x):
                if not self.ready:
                    self.ready = True
                    self.build(x.shape[-1])
                return x @ self.w
        cell = Cell(2)
        opt = torch.optim.SGD(cell.parameters(), lr=0.1)
        """, "GT464", line=11, raises=(ValueError, "empty parameter list")), Shape("""
        class Cell(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.n = n
                self.ready = False
                self.proj = nn.Linear(4, n)
            def build(self, d):
                self.mask = torch.ones(d)
            def forward(self, x):
                if not self.ready:
                    self.ready = True
                    self.build(x.shape[-1])
                return self.proj(x * self.mask)
        cell = Cell(2)
        opt = torch.optim.SGD(cell.parameters(), lr=0.1)
        cell(torch.randn(3, 4)).sum().backward()
        opt.step()
        """, "GT464", holds="len(opt.param_groups[0]['params']) == 2")),
    # GT464: the builder method also runs from __init__ (the fixed cell): its parameters
    # exist before the optimizer; the flagged re-build in forward is a resize guard that
    # never fires for the size the constructor used. The buggy twin calls it from forward only
    "builder-also-run-in-init": (Shape("""
        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.d = None
            def make(self):
                self.g = nn.Parameter(torch.zeros(self.d))
            def forward(self, x):
                if self.d is None or self.d != x.shape[-1]:
                    self.d = x.shape[-1]
                    self.make()
                return x * self.g.sigmoid()
        gate = Gate()
        opt = torch.optim.SGD(gate.parameters(), lr=0.1)
        """, "GT464", line=10, raises=(ValueError, "empty parameter list")), Shape("""
        class Gate(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.d = d
                self.make()
            def make(self):
                self.g = nn.Parameter(torch.zeros(self.d))
            def forward(self, x):
                if self.d != x.shape[-1]:
                    self.d = x.shape[-1]
                    self.make()
                return x * self.g.sigmoid()
        gate = Gate(4)
        opt = torch.optim.SGD(gate.parameters(), lr=0.1)
        gate(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT464", holds="gate.g.abs().sum() > 0")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])
