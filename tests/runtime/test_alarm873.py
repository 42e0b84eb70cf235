"""GT873 (NOTE [evaluation gradients applied], runtime/trace/windows.py): a backward() after
eval-mode calls only counts as an evaluation backward when it fills the gradient of a parameter
an optimizer holds. A saliency map every few steps through the trained model in eval mode,
gradients cleared only after the step, leaks into the next step (bug); the same map through a
frozen teacher, or through a teacher no optimizer holds, writes no gradient a step applies
(look-alikes: held-out 36's subdistill Grad-CAM). Real torch, in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
student = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
teacher = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(student.parameters(), lr=0.1)

def saliency(model, x):
    model.eval()
    x = x.clone().requires_grad_(True)
    model(x).max(1).values.sum().backward()  # <- cause
    model.train()
    return x.grad.abs()
"""

LOOP = """
for step in range(7):
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    if step % 3 == 2:
        saliency({model}, x)
    F.cross_entropy(student(x), y).backward()
    opt.step()
    opt.zero_grad()
"""

CASES = {
    "student_saliency_leaks": ("", "student", True),
    "frozen_teacher_saliency": ("teacher.requires_grad_(False)\n", "teacher", False),
    "teacher_outside_optimizer": ("", "teacher", False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_eval_backward_counts_only_when_it_fills_optimized_grads(name, run_script):
    pre, model, bug = CASES[name]
    src = HEAD + pre + LOOP.format(model=model)
    res = run_script(src)
    assert res.code == 0, res.err
    found = [(f["code"], f["line"]) for f in res.findings if f["code"] == "GT873"]
    assert found == ([("GT873", marked_line(src))] if bug else []), res.findings
