"""runtime54 on real torch, one process, a few steps, tiny models: the cause's line first.

- A clearing of part of what an optimizer steps (a submodule's `zero_grad()`, by set_to_none or
  by zeroing, the first or the last parameters): named at that clearing
  (NOTE [clear of a part]). Look-alikes: the optimizer's, the whole model's, every part's.
- FGSM's `x.requires_grad = True` after the forward that used `x`: the run's `.grad` read as
  None is explained by the static GT156 on the line that set the flag too late
  (`EXPLAINS["grad-none"]`). Look-alike: the flag set before the forward.
"""
from __future__ import annotations

import runpy

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

PARTIAL = """
import torch
from torch import nn
torch.manual_seed(0)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 2)
        self.decoder = nn.Linear(2, 6)

    def forward(self, x):
        return self.decoder(self.encoder(x))


ae = AutoEncoder()
opt = torch.optim.SGD(ae.parameters(), lr=0.1)
for _ in range(4):
    x = torch.randn(5, 6)
    CLEAR  # <- cause
    loss = nn.functional.mse_loss(ae(x), x)
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("clear,bug", [
    ("ae.encoder.zero_grad()", True),  # the first parameters cleared, the last accumulate
    ("ae.decoder.zero_grad(set_to_none=False)", True),  # the last zeroed, the first accumulate
    ("opt.zero_grad()", False),
    ("ae.zero_grad()", False),
    ("ae.encoder.zero_grad(); ae.decoder.zero_grad(set_to_none=False)", False),
])
def test_clear_of_a_part_names_the_clearing(tmp_path, clear, bug):
    import gradtrace

    src = PARTIAL.replace("CLEAR", clear).lstrip("\n")
    path = tmp_path / "ae.py"
    path.write_text(src, encoding="utf-8")
    with gradtrace.trace(static=False) as tr:
        runpy.run_path(str(path))
    found = [(f.code, f.line) for f in tr.findings if f.code in ("GT501", "GT823")]
    assert found == ([("GT501", marked_line(src))] if bug else []), tr.findings
    if bug:
        assert "only part" in tr.findings[0].message


FGSM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def fgsm(model, x, y, eps):
    BODY
    loss = F.cross_entropy(out, y)
    model.zero_grad()
    loss.backward()
    return (x + eps * x.grad.sign()).clamp(0, 1)


torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
x = torch.rand(4, 1, 4, 4)
y = torch.randint(0, 3, (4,))
adv = fgsm(model, x, y, 0.1)
"""


@pytest.mark.parametrize("body,bug", [
    ("out = model(x)\n    x.requires_grad = True  # <- cause", True),
    ("x.requires_grad = True\n    out = model(x)", False),
])
def test_flag_set_after_the_forward_explains_grad_none(run_script, body, bug):
    src = FGSM.replace("BODY", body)
    res = run_script(src)
    if not bug:
        assert res.code == 0 and not res.findings, (res.err, res.findings)
        return
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT156", marked_line(src)), res.findings
    assert first["source"] == "static+runtime"
