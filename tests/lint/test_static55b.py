"""Static misses session 54 left (docs/triage/static55b.md): each shape with a buggy twin in
another style and a silent look-alike; the probes in benchmarks/probes/static55b/ ran on torch
2.13 (the crash text, or a run that ends)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def _src(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _found(src: str, *codes: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(_src(src), "m.py") if f.code in codes)


# -- 1. GT528: state on a layerless module, the graph brought by its input; a reset counts
# only if the script reaches it (NOTE [input fed by a layer], NOTE [unreached defs]) -------
LEAKY = """
import torch
import torch.nn as nn


class Leaky(nn.Module):
    def __init__(self, beta=0.9):
        super().__init__()
        self.beta = beta
        self.mem = torch.zeros(1)

    def clear(self):
        self.mem = torch.zeros(1)

    def forward(self, cur):
        mem = self.beta * self.mem + cur
        self.mem = mem
        return torch.sigmoid(mem)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.lif = Leaky()

    def forward(self, x):
        h = self.fc(x)
        return self.lif(h)


def clear_all(net):
    net.lif.clear()


net = Net()
opt = torch.optim.Adam(net.parameters())
for step in range(3):
    loss = net(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    {after}
"""

NORM_FIRST = """
import torch
import torch.nn as nn


class RunningNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.zeros(4)

    def forward(self, x):
        m = 0.9 * self.mean + 0.1 * x.mean(0)
        self.mean = m
        return x - m


net = nn.Sequential({layers})
opt = torch.optim.Adam(net.parameters())
for step in range(3):
    loss = net(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(("src", "expected"), [
    # twin: the neuron after `self.fc`, its `clear()` called only by an uncalled helper
    (LEAKY.format(after="pass"), [("GT528", 16)]),
    # look-alike: the helper runs after every step
    (LEAKY.format(after="clear_all(net)"), []),
    # look-alike: the reset method called directly
    (LEAKY.format(after="net.lif.clear()"), []),
    # twin: a running mean after a trained layer in a Sequential (its input has a graph)
    (NORM_FIRST.format(layers="nn.Linear(4, 4), RunningNorm(), nn.Linear(4, 3)"),
     [("GT528", 12)]),
    # look-alike: the same module first, on the raw batch (no graph comes in)
    (NORM_FIRST.format(layers="RunningNorm(), nn.Linear(4, 3)"), []),
])
def test_state_fed_by_input(src: str, expected) -> None:
    assert _found(src, "GT528") == expected
