"""`self(x)` and `self.forward(x)` in a method of an nn.Module class run the model (MetaRec's
`train_one_epoch`, found missed in unseen17): a running total of their loss keeps every step's
graph (GT505). Look-alikes stay silent; twins are reported and keep the graph on torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

TEMPLATE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.dec = nn.Linear(6, 3), nn.Linear(3, 6)
    def forward(self, x):
        return self.dec(torch.relu(self.enc(x)))
    def train_one_epoch(self, batches, opt):
        total = 0.0
        for x in batches:
            batch_loss = F.mse_loss({call}, x)
            opt.zero_grad()
            batch_loss.backward()
            opt.step()
            total += {added}
        return total
net = AE()
kept = net.train_one_epoch([torch.randn(4, 6) for _ in range(3)],
                           torch.optim.SGD(net.parameters(), lr=0.1))
"""
TOTAL_LINE = 18


@pytest.mark.parametrize("call", ["self(x)", "self.forward(x)"])
def test_twin_is_reported_and_keeps_the_graph(call: str) -> None:
    src = TEMPLATE.format(call=call, added="batch_loss")
    assert [(f.line, f.code) for f in check_source(src, "s.py", select=["GT505"])] == [
        (TOTAL_LINE, "GT505")]
    env: dict = {}
    exec(compile(src, "s.py", "exec"), env)
    assert env["kept"].grad_fn is not None


@pytest.mark.parametrize("call", ["self(x)", "self.forward(x)"])
def test_look_alike_is_silent_and_keeps_a_number(call: str) -> None:
    src = TEMPLATE.format(call=call, added="batch_loss.item()")
    assert check_source(src, "s.py", select=["GT505"]) == []
    env: dict = {}
    exec(compile(src, "s.py", "exec"), env)
    assert isinstance(env["kept"], float)


def test_self_outside_a_module_class_is_not_a_model() -> None:
    src = textwrap.dedent('''
        class Meter:
            def __call__(self, x):
                return x.sum()
            def run(self, batches, loss_fn, opt):
                total = 0.0
                for x in batches:
                    v = self(x)
                    loss_fn(x).backward()
                    opt.step()
                    opt.zero_grad()
                    total += v
                return total
        ''')
    assert check_source(src, "s.py", select=["GT505"]) == []
