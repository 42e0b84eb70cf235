"""Session 36 (fix36): the false alarms session 35's unseen projects left (docs/triage/fix36.md),
each in another spelling than the project's, next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # In-Time-Over-Parameterization / sparse_learning (NVIDIA's ImageNet `main.py`): the step
    # closure calls a callee handed in as a parameter on the wrapped batch; the function's
    # calls pass a module whose `forward` runs a model it holds and returns its loss (NOTE
    # [passed callees]), whatever the parameter is named. Twin: the calls pass a torch loss:
    # the criterion is given the input, backward has no graph
    "parameter-callee-passed-a-module-that-runs-its-model": (Shape("""
        from torch.autograd import Variable
        class Wrapped(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(3, 2)
                self.crit = nn.CrossEntropyLoss()
            def forward(self, x, y):
                return self.crit(self.net(x), y)
        def make_step(loss_fn, optimizer):
            def _step(inp, target):
                loss = loss_fn(Variable(inp), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        w = Wrapped()
        step = make_step(w, torch.optim.SGD(w.parameters(), lr=0.1))
        w0 = w.net.weight.clone()
        step(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
        """, "GT104", holds="not torch.equal(w0, w.net.weight)"), Shape("""
        from torch.autograd import Variable
        net = nn.Linear(3, 3)
        def make_step(loss_fn, optimizer):
            def _step(inp, target):
                loss = loss_fn(Variable(inp), target)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                return loss.item()
            return _step
        step = make_step(nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
        step(torch.randn(4, 3), torch.tensor([0, 1, 0, 1]))
        """, "GT104", line=5, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
