"""Session 55, the lead: ``detach_()`` on a tensor with history is a cut made in place
(NOTE [detached in place]): the run names that line when backward then finds no grad_fn, also
where the checker cannot see the call (a callback taken from a list). On a gradient buffer
(``p.grad.detach_()``, old ``zero_grad``) it stays a clear, not a cut."""
from __future__ import annotations

from rt_helpers import marked_line

SRC = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
callbacks = [lambda t: t.detach_()]  # <- cause
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    out = model(x)
    for cb in callbacks:
        cb(out)
    loss = F.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_in_place_detach_in_a_callback_is_named(run_script):
    res = run_script(SRC)
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT107", marked_line(SRC)), res.findings
    assert "in place" in first["message"]


def test_detach_of_a_gradient_buffer_is_silent(run_script):
    res = run_script(SRC.replace("[lambda t: t.detach_()]", "[lambda t: t.detach()]").replace(
        "    opt.zero_grad()\n", "    for p in model.parameters():\n        if p.grad is not None:\n"
        "            p.grad.detach_()\n            p.grad.zero_()\n"))
    assert res.code == 0, res.err
    assert res.findings == [], res.findings
