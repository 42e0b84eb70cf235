"""Shapes that fired wrongly on the projects of docs/triage/unseen29a.md (session 29), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
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
    # prompt-to-prompt (DDS_zeroshot.py): the source latent is encoded under `no_grad`, then
    # `z_taregt = z_source.clone(); z_taregt.requires_grad = True` and the loss is built from
    # it: the clone is a new leaf that requires grad. Twin: no flag on the clone
    "flag-set-on-a-clone-of-a-no-grad-value": (Shape("""
        enc = nn.Linear(4, 4)
        with torch.no_grad():
            source = enc(torch.randn(2, 4))
        target = source.clone()
        target.requires_grad = True
        opt = torch.optim.SGD([target], lr=0.1)
        for _ in range(2):
            loss = (target - source * 2).pow(2).sum()
            opt.zero_grad()
            (10 * loss).backward()
            opt.step()
        assert target.grad is not None
        """, "GT201"), Shape("""
        enc = nn.Linear(4, 4)
        with torch.no_grad():
            source = enc(torch.randn(2, 4))
        target = source.clone()
        other = torch.zeros(1)
        other.requires_grad = True
        loss = (target - source * 2).pow(2).sum()
        (10 * loss).backward()
        """, "GT201", line=2, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
