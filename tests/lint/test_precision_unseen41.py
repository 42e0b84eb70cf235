"""Shapes from the projects of docs/triage/unseen41.md (session 41), each in another spelling
than the project's and next to a buggy twin that is still reported; each runs on real torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # NigeloYang/federated_learning_differential_privacy (`pytorch/DIY/grad/auto_grad.py`): the
    # accuracy of a training loop read as `torch.argmax(model(x), dim=1).numpy()`. An integer
    # result never requires grad; GT116 followed `torch.argmax`'s argument as if its result
    # carried the graph. Look-alike: the class indices through NumPy (runs); twin: the
    # probabilities through NumPy (raises)
    "class-indices-of-the-output-through-numpy": (Shape("""
        model = nn.Linear(3, 2)
        x, y = torch.randn(4, 3), torch.zeros(4, dtype=torch.long)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            scores = model(x)
            labels = torch.argmax(scores, dim=1)
            acc = np.mean(labels.numpy() == y.numpy())
        """, "GT116"), Shape("""
        model = nn.Linear(3, 2)
        x, y = torch.randn(4, 3), torch.zeros(4, dtype=torch.long)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            scores = model(x)
            probs = torch.softmax(scores, dim=1)
            acc = np.mean(probs.numpy()[:, 0])
        """, "GT116", line=11, raises=(RuntimeError, "requires grad"))),
    # Atcold/pytorch-PPUU (`map_i80.py`, the environment's `step`): the policy's action
    # un-normalised in place with NumPy's ufuncs, `np.multiply(a, std, a)` and `np.add(a, mean,
    # a)`: the third positional argument is `out`, so the array is updated. GT708 read them
    # as results thrown away. Look-alike: `out` given positionally (the array changes);
    # twin: no `out` (the array is left as it was)
    "numpy-ufunc-with-out-given-positionally": (Shape("""
        class Env:
            def __init__(self):
                self.std, self.mean = np.full(2, 2.0), np.ones(2)
            def step(self, action=None):
                if action is not None:
                    np.multiply(action, self.std, action)
                    np.add(action, self.mean, action)
                    np.sqrt(action, action)
                return action
        act = np.array([4.0, 0.0])
        Env().step(act)
        """, "GT708", holds="np.allclose(act, [3.0, 1.0])"), Shape("""
        class Env:
            def __init__(self):
                self.std, self.mean = np.full(2, 2.0), np.ones(2)
            def step(self, action=None):
                if action is not None:
                    np.multiply(action, self.std)
                    action += self.mean
                return action
        act = np.array([4.0, 0.0])
        Env().step(act)
        """, "GT708", line=6, holds="np.allclose(act, [5.0, 1.0])")),
    # bilzard/kaggle-hms-public (`run/batch_infer.py`): a `match` statement in a file that
    # builds an optimizer. GT411's search for optimizer calls walked a `match`'s cases as
    # statements and crashed (GT002, GT411 and GT421 not run on the file). Look-alike: the
    # memory is a Parameter; twin: a plain tensor handed to the optimizer inside a case
    "optimizer-built-in-a-match-case": (Shape("""
        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.memory = nn.Parameter(torch.randn(3, 4))
            def forward(self, x):
                return self.fc(x) @ self.memory.t()
        model = Memory()
        phase = "train"
        match phase:
            case "train":
                opt = torch.optim.SGD(list(model.parameters()) + [model.memory], lr=0.1)
            case _:
                opt = None
        before = model.memory.detach().clone()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT411", holds="not torch.equal(before, model.memory)"), Shape("""
        class Memory(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.memory = torch.randn(3, 4)
            def forward(self, x):
                return self.fc(x) @ self.memory.t()
        model = Memory()
        phase = "train"
        match phase:
            case "train":
                opt = torch.optim.SGD(list(model.parameters()) + [model.memory], lr=0.1)
            case _:
                opt = None
        before = model.memory.detach().clone()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        """, "GT411", line=5, holds="torch.equal(before, model.memory)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


def test_no_internal_error_on_a_match_statement() -> None:
    """A `match` in a file building an optimizer crashed GT411 and GT421 (GT002): every rule."""
    source = PRELUDE + textwrap.dedent(SHAPES["optimizer-built-in-a-match-case"][1].src)
    assert not [f for f in check_source(source, "shape.py") if f.code == "GT002"]
