"""GT723 (`retain_variables=`, renamed `retain_graph` in PyTorch 0.4) on real torch, and GT509
silent there: the first backward raises TypeError before any graph is freed."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

GAN = """
import torch
import torch.nn as nn
gen, dis = nn.Linear(2, 2), nn.Linear(2, 1)
gen_optim = torch.optim.SGD(gen.parameters(), lr=0.1)
dis_optim = torch.optim.SGD(dis.parameters(), lr=0.1)
z = torch.randn(4, 2)
dis_fake = dis(gen(z))
gen_loss = -dis_fake.mean()
gen_loss.backward({kw}=True)
dis_loss = dis_fake.mean()
dis_loss.backward()
"""


def _codes(src: str) -> list[tuple[str, int]]:
    return sorted((f.code, f.line) for f in check_source(textwrap.dedent(src), "t.py"))


def test_retain_variables_is_reported_at_the_call_that_raises() -> None:
    src = GAN.format(kw="retain_variables")
    got = _codes(src)
    assert ("GT723", 10) in got and not any(c == "GT509" for c, _ in got)
    with pytest.raises(TypeError, match="retain_variables"):
        exec(compile(src, "t.py", "exec"), {})


def test_retain_graph_look_alike_is_silent_and_runs() -> None:
    src = GAN.format(kw="retain_graph")
    assert not any(c in ("GT723", "GT509") for c, _ in _codes(src))
    exec(compile(src, "t.py", "exec"), {})


def test_autograd_grad_with_the_old_keyword() -> None:
    src = """
    import torch
    x = torch.ones(2, requires_grad=True)
    y = (x * x).sum()
    (g,) = torch.autograd.grad(y, [x], retain_variables=True)
    """
    assert ("GT723", 5) in _codes(src)
    with pytest.raises(TypeError, match="retain_variables"):
        exec(compile(textwrap.dedent(src), "t.py", "exec"), {})
