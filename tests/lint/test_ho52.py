"""The static facts built for held-out batch 46 (docs/triage/ho52.md).

Each pair is a correct shape the checker must leave alone and a buggy twin it must report on
its line, written in other names and shapes than the real-world cases; every snippet runs on
real torch and the test checks what the finding claims."""
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
    # GT307: `t.detach().requires_grad_()` (or `t.data.clone()...`) is a new leaf whatever `t`
    # was; a view of it bound to the same name is not, and its `.grad` stays None.
    "detached-leaf-viewed-after": (Shape("""
        net = nn.Linear(12, 2)
        def saliency(img):
            img = img.reshape(1, -1).detach().requires_grad_()
            net(img).max().backward()
            return img.grad.abs()
        sal = saliency(torch.rand(3, 4))
        """, "GT307", holds="sal.shape == (1, 12)"), Shape("""
        net = nn.Linear(12, 2)
        def saliency(img):
            img = img.data.clone().requires_grad_()
            img = img.reshape(1, -1)
            net(img).max().backward()
            return img.grad
        sal = saliency(torch.rand(3, 4))
        """, "GT307", line=4, holds="sal is None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_lookalike_is_silent(name):
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_twin_is_reported(name):
    judge(PRELUDE, SHAPES[name][1])
