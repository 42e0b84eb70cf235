"""Held-out batch 45 (docs/triage/ho51.md) at run time, real torch, in other spellings than
the case's: a custom Function's ``backward`` refused by Python for its count of gradients
(``takes 2 positional arguments but 3 were given`` / ``missing 1 required positional
argument``) is named at its ``def`` under the static rule's code GT135, found in the failed
backward's graph by the name the message gives; the look-alike takes one gradient per output
and runs clean."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

CENTRE = """
import torch
import torch.nn as nn

class Centre(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mean = x.mean(0, keepdim=True)
        ctx.mark_non_differentiable(mean)
        return x - mean, mean

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out - grad_out.mean(0, keepdim=True)

layer = nn.Linear(3, 2)
opt = torch.optim.SGD(layer.parameters(), lr=0.1)
for _ in range(2):
    centred, _ = Centre.apply(layer(torch.randn(5, 3)))
    loss = centred.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("sig,bug", [
    ("def backward(ctx, grad_out):", True),                  # 1 taken, 2 outputs
    ("def backward(ctx, grad_out, grad_mean, extra):", True),  # 3 taken, 2 outputs
    ("def backward(ctx, grad_out, grad_mean):", False),       # the look-alike
])
def test_backward_gradient_arguments(run_script, sig: str, bug: bool) -> None:
    res = run_script(CENTRE.replace("def backward(ctx, grad_out):", sig))
    got = [(f["code"], f["line"]) for f in res.findings]
    if bug:
        assert res.code != 0 and got[:1] == [("GT135", 12)], (got, res.err)
    else:
        assert res.code == 0 and got == [], (got, res.err)
