"""Session 46, lead: GT614 when the model is wrapped again after the change (the new
DistributedDataParallel hooks the parameters as they are then): silent look-alikes and the
buggy twins beside them."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

MODEL = '''
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = None

    def add_mix(self):
        self.mix = nn.Parameter(torch.eye(4))

    def forward(self, x):
        return x if self.mix is None else x @ self.mix


def add_mixes(model):
    for m in model.modules():
        if isinstance(m, Gate):
            m.add_mix()


def main(net):
    model = DDP(net)
    {change}
    {again}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(2, 4)).sum()
    loss.backward()
    opt.step()
'''
LINE = MODEL.splitlines().index("    {change}") + 1
CHANGES = ["model.module.gate.mix = nn.Parameter(torch.eye(4))", "add_mixes(model.module)"]


def _gt614(change: str, again: str) -> list[int]:
    src = textwrap.dedent(MODEL.format(change=change, again=again))
    return [f.line for f in check_source(src) if f.code == "GT614"]


@pytest.mark.parametrize("change", CHANGES)
def test_change_after_the_wrap_is_reported(change):
    assert _gt614(change, "pass") == [LINE]


@pytest.mark.parametrize("again", ["model = DDP(model.module)", "model = DDP(net)"])
@pytest.mark.parametrize("change", CHANGES)
def test_change_then_a_new_wrap_is_silent(change, again):
    assert _gt614(change, again) == []


@pytest.mark.parametrize("change", CHANGES)
def test_a_wrap_of_another_model_after_the_change_keeps_it(change):
    assert _gt614(change, "other = DDP(nn.Linear(4, 4))") == [LINE]
