"""GT514 through a stepping caller (NOTE [stepping caller]): a helper method clips and then
backwards, and its caller steps the optimizer right after the call, so the step applies
unclipped gradients. Look-alikes: the clip after the backward, and a caller that clips again
between the call and the step. Each snippet runs on real torch; the buggy one takes a step
larger than the clip allows."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SRC = '''
import torch
import torch.nn as nn


class Balancer:
    def __init__(self, max_norm):
        self.max_norm = max_norm

    def run_backward(self, loss, params):
        {body}
        return loss


torch.manual_seed(0)
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=1.0)
helper = Balancer(0.1)
before = net.weight.detach().clone()
x, y = torch.randn(16, 4) * 10, torch.randn(16, 1) * 10
opt.zero_grad()
helper.run_backward(((net(x) - y) ** 2).mean(), list(net.parameters()))
{between}opt.step()
result = (net.weight.detach() - before).norm().item()
'''
CLIP_FIRST = ("torch.nn.utils.clip_grad_norm_(params, self.max_norm)\n"
              "        loss.backward()")
CLIP_AFTER = ("loss.backward()\n"
              "        torch.nn.utils.clip_grad_norm_(params, self.max_norm)")


def _moved(src: str) -> float:
    ns: dict[str, object] = {}
    exec(compile(src, "<snippet>", "exec"), ns)
    return ns["result"]  # type: ignore[return-value]


def test_clip_before_backward_in_a_helper_the_caller_steps_after_is_reported() -> None:
    src = SRC.format(body=CLIP_FIRST, between="")
    assert _moved(src) > 0.1  # the step was not clipped
    assert ("GT514", 11) in [(f.code, f.line) for f in check_source(src)]


def test_clip_after_backward_is_silent() -> None:
    src = SRC.format(body=CLIP_AFTER, between="")
    assert _moved(src) <= 0.1 + 1e-6
    assert [f.code for f in check_source(src) if f.code == "GT514"] == []


def test_caller_clipping_again_before_its_step_is_silent() -> None:
    src = SRC.format(body=CLIP_FIRST, between=(
        "torch.nn.utils.clip_grad_norm_(net.parameters(), 0.1)\n"))
    assert _moved(src) <= 0.1 + 1e-6
    assert [f.code for f in check_source(src) if f.code == "GT514"] == []
