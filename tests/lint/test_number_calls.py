"""A call that hands back a Python number collects no graph (GT505, NOTE in
``analysis.objects.number_call``): a loss-computing object whose ``__call__`` ends in
``.item()``, passed to the evaluation loop as a parameter, next to a buggy twin whose
``__call__`` returns the loss tensor. Each snippet runs on real torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SRC = '''
import torch
import torch.nn as nn


class LossCompute:
    def __init__(self, head, criterion):
        self.head = head
        self.criterion = criterion

    def __call__(self, feats, target, count):
        out = self.head(feats)
        loss = self.criterion(out, target) / count
        return {ret}


def evaluate(batches, model, compute):
    total = 0
    for x, y in batches:
        feats = model(x)
        total += compute(feats, y, y.numel())
    return total


model = nn.Linear(4, 4)
head = nn.Linear(4, 3)
batches = [(torch.randn(2, 4), torch.randint(0, 3, (2,))) for _ in range(3)]
result = evaluate(batches, model, LossCompute(head, nn.CrossEntropyLoss(reduction="sum")))
'''


def _run(src: str) -> object:
    ns: dict[str, object] = {}
    exec(compile(src, "<snippet>", "exec"), ns)
    return ns["result"]


def test_call_returning_item_collects_no_graph() -> None:
    src = SRC.format(ret="loss.item() * count")
    assert isinstance(_run(src), float)
    assert [f.code for f in check_source(src)] == []


def test_twin_returning_the_loss_tensor_is_reported() -> None:
    src = SRC.format(ret="loss * count")
    result = _run(src)
    assert isinstance(result, torch.Tensor) and result.grad_fn is not None
    found = [(f.code, f.line) for f in check_source(src)]
    assert ("GT505", 21) in found


def test_helper_function_returning_a_number_collects_no_graph() -> None:
    src = textwrap.dedent('''
        import torch
        import torch.nn as nn

        def score(model, x, y):
            return nn.functional.mse_loss(model(x), y).item()

        def evaluate(model, loader):
            total = 0
            for x, y in loader:
                total += score(model, x, y)
            return total

        model = nn.Linear(3, 1)
        loader = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(2)]
        result = evaluate(model, loader)
    ''')
    assert isinstance(_run(src), float)
    assert [f.code for f in check_source(src)] == []
