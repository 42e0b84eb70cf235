"""GT512 when the clear runs after the step's `if` on every pass (AlpacaFarm's PPO trainer): on
the passes that skip the step it erases the micro-batches' gradients. Look-alikes stay silent;
twins are reported on their line, and on torch the step sees the last micro-batch alone."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn
torch.manual_seed(0)
batches = [torch.randn(4, 3) for _ in range(4)]
seen = []
"""

LOOK_ALIKES = [
    """
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for i, x in enumerate(batches):
        net(x).sum().backward()
        if (i + 1) % 4 == 0:
            seen.append(net.bias.grad.clone())
            opt.step()
            opt.zero_grad()
    """,
    """
    class Fit:
        def __init__(self, model):
            self.model = model
            self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def run(self):
            for i, x in enumerate(batches):
                self.model(x).sum().backward()
                last = (i + 1) % 4 == 0
                if last:
                    seen.append(self.model.bias.grad.clone())
                    self.opt.step()
                    self.model.zero_grad()
    Fit(nn.Linear(3, 1)).run()
    """,
]

TWINS = [
    ("""
    net = nn.Linear(3, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for i, x in enumerate(batches):
        net(x).sum().backward()
        if (i + 1) % 4 == 0:
            seen.append(net.bias.grad.clone())
            opt.step()
        opt.zero_grad()
    """, 8),
    ("""
    class Fit:
        def __init__(self, model):
            self.model = model
            self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        def run(self):
            for i, x in enumerate(batches):
                self.model(x).sum().backward()
                last = (i + 1) % 4 == 0
                if last:
                    seen.append(self.model.bias.grad.clone())
                    self.opt.step()
                self.model.zero_grad()
    Fit(nn.Linear(3, 1)).run()
    """, 12),
]


def _src(body: str) -> str:
    return PRELUDE + textwrap.dedent(body).lstrip("\n")


def _found(body: str) -> list[tuple[int, str]]:
    off = PRELUDE.count("\n")
    return [(f.line - off, f.code) for f in check_source(_src(body), "s.py", select=["GT512"])]


def _stepped_bias_grad(body: str) -> float:
    env: dict = {}
    exec(compile(_src(body), "s.py", "exec"), env)
    return float(env["seen"][0])


@pytest.mark.parametrize("body", LOOK_ALIKES)
def test_look_alike_is_silent_and_steps_on_every_micro_batch(body: str) -> None:
    assert _found(body) == []
    assert _stepped_bias_grad(body) == 16.0  # 4 micro-batches of 4 rows


@pytest.mark.parametrize("body,line", TWINS)
def test_twin_is_reported_and_steps_on_the_last_micro_batch(body: str, line: int) -> None:
    assert _found(body) == [(line, "GT512")]
    assert _stepped_bias_grad(body) == 4.0
