"""GT505 through a scaled loss: `loss = batch_loss / n_token; loss.backward()` and a running
total of `batch_loss` keeps the same graph as one of `loss` (OpenASR). Look-alikes stay silent;
twins are reported on their line and really keep the graph on torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

PRELUDE = """\
import torch
import torch.nn as nn
torch.manual_seed(0)
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
batches = [(torch.randn(3, 4), torch.randn(3, 1)) for _ in range(3)]
"""

LOOK_ALIKES = [
    """
    total = 0.0
    for x, y in batches:
        raw = ((net(x) - y) ** 2).sum()
        loss = raw / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = total + raw.item()
    kept = total
    """,
    """
    total = 0.0
    for x, y in batches:
        raw = ((net(x) - y) ** 2).sum()
        loss = raw / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += raw.detach()
    kept = total
    """,
]

TWINS = [
    ("""
    total = 0.0
    for x, y in batches:
        raw = ((net(x) - y) ** 2).sum()
        loss = raw / x.size(0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = total + raw
    kept = total
    """, 8),
    ("""
    kept = []
    for x, y in batches:
        batch_loss = ((net(x) - y) ** 2).mean()
        loss = 0.5 * batch_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        kept.append(batch_loss)
    """, 8),
]


def _src(body: str) -> str:
    return PRELUDE + textwrap.dedent(body).lstrip("\n")


def _found(body: str) -> list[tuple[int, str]]:
    off = PRELUDE.count("\n")
    return [(f.line - off, f.code) for f in check_source(_src(body), "s.py", select=["GT505"])]


def _kept(body: str):
    env: dict = {}
    exec(compile(_src(body), "s.py", "exec"), env)
    kept = env["kept"]
    return kept[-1] if isinstance(kept, list) else kept


@pytest.mark.parametrize("body", LOOK_ALIKES)
def test_look_alike_is_silent_and_keeps_no_graph(body: str) -> None:
    assert _found(body) == []
    assert getattr(_kept(body), "grad_fn", None) is None


@pytest.mark.parametrize("body,line", TWINS)
def test_twin_is_reported_and_keeps_the_graph(body: str, line: int) -> None:
    assert _found(body) == [(line, "GT505")]
    assert _kept(body).grad_fn is not None
