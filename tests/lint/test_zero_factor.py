"""GT423: an all-zeros plain tensor attribute that the module multiplies by (DeepCTR's Dice
alpha). Look-alikes stay silent and run; twins in other spellings are reported on their line and
on torch the tensor is still all zeros after training."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn
torch.manual_seed(0)
"""
TRAIN = """
net = Block(6)
opt = torch.optim.Adam(net.parameters(), lr=0.05)
for _ in range(3):
    opt.zero_grad()
    net(torch.randn(5, 6)).pow(2).mean().backward()
    opt.step()
"""

LOOK_ALIKES = [
    # a parameter: it trains
    ("""
    class Block(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.gamma = nn.Parameter(torch.zeros(1))
        def forward(self, x):
            return x + self.gamma * self.fc(x)
    """, "net.gamma"),
    # a running statistic, written in forward: a state, not a weight
    ("""
    class Block(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.decay = torch.zeros(n)
        def forward(self, x):
            h = self.fc(x)
            out = h + self.decay * 0.5
            self.decay = 0.9 * self.decay + 0.1 * h.detach().mean(0)
            return out
    """, None),
    # added, not multiplied: a zero bias is pointless but the product is not dead
    ("""
    class Block(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.shift = torch.zeros(n)
        def forward(self, x):
            return self.fc(x) + self.shift
    """, None),
]

TWINS = [
    ("""
    class Block(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.gamma = torch.zeros(1)
        def forward(self, x):
            return x + self.gamma * self.fc(x)
    """, 5, "net.gamma"),
    ("""
    class Block(nn.Module):
        def __init__(self, n, dev="cpu"):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.slope = torch.zeros(n).to(dev)
        def forward(self, x):
            h = self.fc(x)
            return torch.where(h > 0, h, h * self.slope)
    """, 5, "net.slope"),
]


def _src(body: str) -> str:
    return PRELUDE + textwrap.dedent(body).lstrip("\n") + TRAIN


def _found(body: str) -> list[tuple[int, str]]:
    off = PRELUDE.count("\n")
    return [(f.line - off, f.code) for f in check_source(_src(body), "s.py", select=["GT423"])]


def _run(body: str) -> dict:
    env: dict = {}
    exec(compile(_src(body), "s.py", "exec"), env)
    return env


@pytest.mark.parametrize("body,trained", LOOK_ALIKES)
def test_look_alike_is_silent_and_runs(body: str, trained: str | None) -> None:
    assert _found(body) == []
    env = _run(body)
    if trained:
        assert float(eval(trained, env).detach().abs().max()) > 0


@pytest.mark.parametrize("body,line,attr", TWINS)
def test_twin_is_reported_and_stays_zero(body: str, line: int, attr: str) -> None:
    assert _found(body) == [(line, "GT423")]
    env = _run(body)
    assert float(eval(attr, env).abs().max()) == 0.0
    assert not any(p is eval(attr, env) for p in env["net"].parameters())
