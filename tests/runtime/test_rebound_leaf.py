"""`gradtrace run` on a `.grad` read of a name whose leaf was lost where the name was bound
(NOTE [leaf rebound by its own statement] in `runtime/trace/rebound_leaf.py`; issue 13 §2,
held-out 9's pytorch#32708): GT305 at that statement, not GT307 at the read.

Bugs: `lhs_pos = lhs_pos.view(...)` (a name rebound to its own view), and the same loss in
another spelling: an attribute bound to a requires-grad tensor reshaped at creation, read
through the object. Look-alikes: the view bound to a new name (the leaf's `.grad` read: silent),
and a module output read without `retain_grad()` (GT307 stays on the read: there the fix is
`retain_grad()`). Real torch, in-process `gradtrace run`.
"""
from __future__ import annotations

import pytest

BUGS = {
    "name_rebound_to_its_view": """
import torch
lhs_pos = torch.linspace(1, 8, steps=8, requires_grad=True)
lhs_pos = lhs_pos.view(2, 2, 2)  # C
(lhs_pos * 2).sum().backward()
print(lhs_pos.grad)
""",
    "attribute_reshaped_at_creation": """
import torch

class Scaler:
    def __init__(self):
        self.gain = torch.ones(4, requires_grad=True).reshape(4, 1)  # C

    def __call__(self, x):
        return x @ self.gain

s = Scaler()
s(torch.randn(3, 4)).pow(2).mean().backward()
grads = s.gain.grad
print(grads)
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_the_statement_that_lost_the_leaf_is_named(run_script, name):
    src = BUGS[name].lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    first = res.findings[0]
    assert res.code == 0 and (first["code"], first["line"]) == ("GT305", line), (first, res.err)


def test_view_under_a_new_name_is_silent(run_script):
    res = run_script("""
import torch
lhs_pos = torch.linspace(1, 8, steps=8, requires_grad=True)
lhs_pos2 = lhs_pos.view(2, 2, 2)
(lhs_pos2 * 2).sum().backward()
print(lhs_pos.grad)
""")
    assert res.code == 0 and res.findings == [], (res.findings, res.err)


def test_module_output_read_keeps_the_read_line(run_script):
    src = """
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
out = model(torch.randn(5, 3))
out.pow(2).mean().backward()
print(out.grad)  # C
""".lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT307", line), (first, res.err)
