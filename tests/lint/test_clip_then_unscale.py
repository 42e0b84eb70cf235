"""GT524 when `unscale_` comes after the clip (NCAR CREDIT): the clip still reads the scaled
gradients. Look-alikes stay silent; twins are reported on their line, and on torch the update
they make is the scale (65536) times too small."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
net = nn.Linear(6, 3)
before = net.weight.detach().clone()
opt = torch.optim.SGD(net.parameters(), lr=1.0)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
data = [(torch.randn(5, 6), torch.randn(5, 3) * 10) for _ in range(1)]
"""

LOOK_ALIKES = [
    """
    def fit(clip=True):
        for x, y in data:
            opt.zero_grad()
            scaler.scale(F.mse_loss(net(x), y)).backward()
            if clip:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
    fit()
    """,
]

TWINS = [
    ("""
    class Loop:
        def run(self):
            for x, y in data:
                opt.zero_grad()
                scaler.scale(F.mse_loss(net(x), y)).backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
                scaler.unscale_(opt)
                scaler.step(opt)
                scaler.update()
    Loop().run()
    """, 6),
    ("""
    for x, y in data:
        opt.zero_grad()
        scaler.scale(F.mse_loss(net(x), y)).backward()
        torch.nn.utils.clip_grad_value_(net.parameters(), 0.5)
        found = scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
    """, 4),
]


def _src(body: str) -> str:
    return PRELUDE + textwrap.dedent(body).lstrip("\n")


def _found(body: str) -> list[tuple[int, str]]:
    off = PRELUDE.count("\n")
    return [(f.line - off, f.code) for f in check_source(_src(body), "s.py", select=["GT524"])]


def _moved(body: str) -> float:
    env: dict = {}
    exec(compile(_src(body), "s.py", "exec"), env)
    return float((env["net"].weight.detach() - env["before"]).norm())


@pytest.mark.parametrize("body", LOOK_ALIKES)
def test_look_alike_is_silent_and_steps_by_the_clip(body: str) -> None:
    assert _found(body) == []
    assert _moved(body) > 0.5


@pytest.mark.parametrize("body,line", TWINS)
def test_twin_is_reported_and_steps_by_a_scaled_down_gradient(body: str, line: int) -> None:
    assert _found(body) == [(line, "GT524")]
    assert _moved(body) < 1e-3
