"""runtime50 on real torch, one process, a few steps, tiny models.

- NOTE [epsilon that drowns a log's gradient] (GT900): ``log(sigmoid(d) + eps)`` (and
  ``log(1 - sigmoid(d) + eps)``) on scores far enough from 0 that the sigmoid's output (or its
  complement) is far below ``eps`` for many elements: named at the log's line. Look-alikes:
  ``F.logsigmoid`` (the fix), the same guarded log on scores that never saturate, a ``clamp``
  of the probabilities instead of an added epsilon, a guarded log of a softmax.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

BPR = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
lin = nn.Linear(4, 1)
x = torch.randn(64, 4) * 100
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
for step in range(2):
    d = lin(x).squeeze(-1)
    loss = -torch.mean(LOSS)  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _lines(res: object, code: str) -> list[int]:
    return [f["line"] for f in res.findings if f["code"] == code]  # type: ignore[attr-defined]


@pytest.mark.parametrize("loss", ["torch.log(torch.sigmoid(d) + 1e-10)",
                                  "torch.log(1 - torch.sigmoid(d) + 1e-10)"])
def test_epsilon_drowning_a_saturated_sigmoid_is_named(run_script, loss):
    src = BPR.replace("LOSS", loss)
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT900") == [marked_line(src)], res.findings
    assert res.findings[0]["code"] == "GT900", res.findings


@pytest.mark.parametrize("loss", [
    "F.logsigmoid(d)",  # the fix
    "torch.log(torch.sigmoid(d * 1e-2) + 1e-10)",  # the guard never dominates
    "torch.log(torch.sigmoid(d).clamp(min=1e-10))",  # a clamp, not an added epsilon
    "torch.log(torch.softmax(torch.stack([d, -d], 1), 1) + 1e-10)[:, 0]",  # a softmax
])
def test_guard_that_drowns_nothing_or_no_sigmoid_is_not_reported(run_script, loss):
    res = run_script(BPR.replace("LOSS", loss))
    assert res.code == 0, res.err
    assert _lines(res, "GT900") == [], res.findings
