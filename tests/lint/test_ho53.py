"""Session 53, helper ho53: general facts behind held-out batch 47's misses. Each shape: a
buggy twin with its code and line, and silent look-alikes, in another style than the case."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [a held optimizer never stepped]: a per-batch method of a trainer clears and fills the
# gradients of `self.opt`; nothing in the file steps it (checked on torch 2.13: the weights
# stay bit-identical)
LEARNER = '''
import torch
from torch import nn
{base_import}

class Learner{base}:
    def __init__(self, net, lr):
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt, 0.9)

    def training_step(self, batch):
        inputs, targets = batch
        self.opt.zero_grad()
        out = self.net(inputs)
        loss = nn.functional.cross_entropy(out, targets)
        loss.backward()
        {after}
        return float(loss)


def run(learner, data, epochs):
    for _ in range(epochs):
        it = iter(data)
        while True:
            try:
                learner.training_step(next(it))
            except StopIteration:
                break
        {outside}
'''


@pytest.mark.parametrize("after, outside, base, expected", [
    ("learner_log = None", "pass", "", [17]),                  # no step at all: the backward
    ("self.sched.step()", "pass", "", [18]),                   # the schedule stepped instead
    ("self.opt.step()", "learner.sched.step()", "", []),       # stepped in the method
    ("self.sched.step()", "learner.opt.step()", "", []),       # stepped by the caller
    ("self.sched.step()", "pass", "(BaseLearner)", []),        # a base out of sight may step it
])
def test_held_optimizer_never_stepped(after, outside, base, expected):
    src = LEARNER.format(after=after, outside=outside, base=base,
                         base_import="from lib import BaseLearner" if base else "")
    assert _found(src, "GT544") == expected
