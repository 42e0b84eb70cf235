"""Shapes that fired wrongly on the projects of docs/triage/unseen33b.md (session 33), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

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
    # project-NN-Pytorch-scripts (core_scripts/nn_manager/nn_manager.py): `if
    # args.size_accumulate_grad > 1:` divides the loss, backwards and steps under `% N`; its
    # `else:` backwards the plain loss and steps on every pass. The divided backward never
    # runs in a pass of the plain arm's step. Twin: the step after the two arms: every pass
    # steps the partial, scaled sum
    "plain-arm-steps-its-own-undivided-loss": (Shape("""
        class Cfg:
            accum = 1
        def run(model, opt, batches, cfg):
            steps = 0
            for i, (x, y) in enumerate(batches):
                if cfg.accum > 1:
                    if i % cfg.accum == 0:
                        opt.zero_grad()
                else:
                    opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                if cfg.accum > 1:
                    loss = loss / cfg.accum
                    loss.backward()
                    if (i + 1) % cfg.accum == 0:
                        opt.step()
                        steps += 1
                else:
                    loss.backward()
                    opt.step()
                    steps += 1
            return steps
        net = nn.Linear(3, 1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
        n = run(net, torch.optim.SGD(net.parameters(), lr=0.1), data, Cfg())
        """, "GT519", holds="n == 4"), Shape("""
        class Cfg:
            accum = 2
        def run(model, opt, batches, cfg):
            steps = 0
            for i, (x, y) in enumerate(batches):
                if i % cfg.accum == 0:
                    opt.zero_grad()
                loss = F.mse_loss(model(x), y)
                if cfg.accum > 1:
                    loss = loss / cfg.accum
                    loss.backward()
                else:
                    loss.backward()
                opt.step()
                steps += 1
            return steps
        net = nn.Linear(3, 1)
        data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
        n = run(net, torch.optim.SGD(net.parameters(), lr=0.1), data, Cfg())
        """, "GT519", line=14, holds="n == 4")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
