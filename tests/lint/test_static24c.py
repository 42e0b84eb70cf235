"""Readings of docs/triage/static24c.md, written from each mechanism's sentence rather than from
the case it came from: a buggy twin that real torch shows wrong (the checker names its line) and
a correct look-alike of the same shape that runs (the checker stays silent)."""
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
warnings.simplefilter("ignore")
'''

# (silent look-alike, buggy twin)
SHAPES = {
    # GT708 widened: a state container's detach() drops each member's `.detach()`; the
    # look-alike rebinds the members (and another class's in-place detach() is called alone)
    "state-members-detach-dropped": (Shape("""
        class Carry:
            def __init__(self, h, c):
                self.h, self.c = h, c
            def members(self):
                return [self.h, self.c]
            def detach(self):
                self.h, self.c = (t.detach() for t in self.members())
        rnn = nn.LSTMCell(3, 4)
        st = Carry(*rnn(torch.randn(2, 3)))
        for s in [st]:
            s.detach()
        """, "GT708", holds="st.h.grad_fn is None"), Shape("""
        class Carry:
            def __init__(self, h, c):
                self.h, self.c = h, c
            def members(self):
                return [self.h, self.c]
            def detach(self):
                for t in self.members():
                    t.detach()
        rnn = nn.LSTMCell(3, 4)
        st = Carry(*rnn(torch.randn(2, 3)))
        st.detach()
        """, "GT708", 8, holds="st.h.grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
