"""A model handed to a function as a parameter is the module every caller passes
(NOTE [parameter kinds], in the core kind lookup): GT758 reads the softmax at the end of its
``forward`` through ``def fit(net, ...)``. Twin and look-alikes run on real torch."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

TEMPLATE = '''
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 4)
        self.norm = nn.Softmax(dim=-1)

    def forward(self, x):
        return {out}


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 4)

    def forward(self, x):
        return self.body(x)


def fit(net, batches, opt):
    for x, y in batches:
        opt.zero_grad()
        loss = criterion(net(x), y)
        loss.backward()
        opt.step()
    return loss.item()


criterion = nn.CrossEntropyLoss()
batches = [(torch.randn(8, 6), torch.randint(0, 4, (8,))) for _ in range(3)]
first = {first}()
fit(first, batches, torch.optim.SGD(first.parameters(), lr=0.1))
{second}
'''
SECOND = "second = Plain()\nfit(second, batches, torch.optim.SGD(second.parameters(), lr=0.1))"


def _codes(src: str) -> list[tuple[str, int]]:
    exec(compile(src, "<snippet>", "exec"), {})
    return [(f.code, f.line) for f in check_source(src)]


def test_softmax_model_passed_to_fit_is_reported() -> None:
    src = TEMPLATE.format(out="self.norm(self.body(x))", first="Scorer", second="")
    assert ("GT758", 13) in _codes(src)


def test_logits_model_passed_to_fit_is_silent() -> None:
    src = TEMPLATE.format(out="self.body(x)", first="Scorer", second="")
    assert _codes(src) == []


def test_callers_passing_different_classes_leave_it_unknown() -> None:
    src = TEMPLATE.format(out="self.norm(self.body(x))", first="Scorer", second=SECOND)
    assert [c for c, _ in _codes(src) if c == "GT758"] == []
