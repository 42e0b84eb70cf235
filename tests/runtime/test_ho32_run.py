"""Held-out batch 32 (docs/triage/ho32.md) at run time: GT870 (weight decay moving a parameter
whose gradient is always zero) is not said for a layer whose input was all zero while its bias
got a gradient (a dead feature map: what backward computes, not a freeze by zeroing); the same
layer frozen by zeroing its gradients is still named. One process, a few steps, real torch."""
from __future__ import annotations

import runpy

import pytest

torch = pytest.importorskip("torch")

PROGRAM = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def train(zero_by_hand):
    torch.manual_seed(0)
    head = nn.Linear(8, 3)
    opt = torch.optim.SGD(head.parameters(), lr=0.1, weight_decay=1e-2)
    for _ in range(4):
        y = torch.randint(0, 3, (5,))
        feats = torch.zeros(5, 8)  # a dead feature map: every input of the head is 0
        opt.zero_grad()
        F.cross_entropy(head(feats), y).backward()
        if zero_by_hand:
            for p in head.parameters():
                p.grad = torch.zeros_like(p)
        opt.step()
    return head
"""


@pytest.mark.parametrize("zero_by_hand", [True, False])
def test_decay_on_dead_input_vs_zeroed_grads(tmp_path, zero_by_hand: bool) -> None:
    import gradtrace

    path = tmp_path / "prog.py"
    path.write_text(PROGRAM, encoding="utf-8")
    train = runpy.run_path(str(path))["train"]
    with gradtrace.trace() as tr:
        head = train(zero_by_hand)
    found = [f for f in tr.findings if f.code == "GT870"]
    if zero_by_hand:  # the buggy twin: a freeze by zeroing, decayed anyway
        assert found and ".weight" in found[0].message and ".bias" in found[0].message
    else:  # dead input: the weight's gradient is 0, the bias's is not; nothing to say
        assert not found, [f.message for f in found]
        assert head.bias.grad.abs().sum() > 0 and head.weight.grad.abs().sum() == 0
