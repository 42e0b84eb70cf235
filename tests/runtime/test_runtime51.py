"""runtime51 on real torch, one process, a few steps, tiny models.

- NOTE [difference of a tensor with itself] (GT902): ``cur = saved[:n]`` with ``n`` the whole
  length, then ``(cur - saved) ** 2`` in a penalty added to the loss: named at the statement
  that bound the view; ``p - anchor`` with ``anchor`` kept as the parameter itself: named at the
  difference. Look-alikes: the slice of the current parameter (the fix), a shorter slice, a
  shifted slice, an anchor saved with ``.detach().clone()``, ``x - x.detach()``.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

EWC = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Linear(4, 2)
saved = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def penalty():
    total = torch.zeros(())
    for cur, old in zip(model.parameters(), saved):
        n = old.shape[0]
        PICK
        total = total + DIFF
    return total


for step in range(2):
    loss = model(torch.randn(8, 4)).pow(2).mean() + penalty()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _lines(res: object, code: str) -> list[int]:
    return [f["line"] for f in res.findings if f["code"] == code]  # type: ignore[attr-defined]


def test_view_of_the_whole_saved_tensor_subtracted_from_it_is_named(run_script):
    src = EWC.replace("PICK", "cur = old[:n]  # <- cause").replace(
        "DIFF", "((cur - old) ** 2).sum()")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT902") == [marked_line(src)], res.findings
    assert res.findings[0]["code"] == "GT902", res.findings


def test_anchor_kept_as_the_parameter_itself_is_named_at_the_difference(run_script):
    src = EWC.replace("saved = [p.detach().clone() for p in model.parameters()]",
                      "saved = [p for p in model.parameters()]").replace(
        "PICK", "pass").replace("total = total + DIFF",
                                "total = total + ((cur - old) ** 2).sum()  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT902") == [marked_line(src)], res.findings


@pytest.mark.parametrize("pick,diff", [
    ("cur = cur[:n]", "((cur - old) ** 2).sum()"),  # the fix: the current parameter
    ("cur = old[:n - 1]", "((cur - old[1:]) ** 2).sum()"),  # a shorter, shifted slice
    ("cur = old[:n]", "((cur[1:] - old[:-1]) ** 2).sum()"),  # shifted views of one base
    ("pass", "((cur - cur.detach()) ** 2).sum()"),  # the zero-valued trick on purpose
])
def test_difference_of_distinct_elements_is_not_reported(run_script, pick, diff):
    res = run_script(EWC.replace("PICK", pick).replace("DIFF", diff))
    assert res.code == 0, res.err
    assert _lines(res, "GT902") == [], res.findings
