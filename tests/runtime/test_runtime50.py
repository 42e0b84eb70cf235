"""runtime50 on real torch, one process, a few steps, tiny models.

- NOTE [epsilon that drowns a log's gradient] (GT900): ``log(sigmoid(d) + eps)`` (and
  ``log(1 - sigmoid(d) + eps)``) on scores far enough from 0 that the sigmoid's output (or its
  complement) is far below ``eps`` for many elements: named at the log's line. Look-alikes:
  ``F.logsigmoid`` (the fix), the same guarded log on scores that never saturate, a ``clamp``
  of the probabilities instead of an added epsilon, a guarded log of a softmax, a guarded log
  weighted element by element (a hand-written focal or binary cross-entropy).
- NOTE [in-place result used as a value] (GT901): ``v.add_(eps).sqrt()`` on a tensor of a
  user-written optimizer's state, ``flat.abs_() * 2`` on a view of a local gradient: named at
  the statement. Look-alikes: the out-of-place op (the fixes), in place on a temporary
  (``v.sqrt().add_(eps)``), on a fresh local that is no view and no state, chained in place,
  on a clone.
- NOTE [teacher target computed with grad] (GT821's line): ``t = teacher.encode(x)`` outside
  ``no_grad`` as the target of ``l1_loss``/``mse_loss`` (through a helper that takes it as an
  argument): GT821 names that statement, not the optimizer. Look-alikes: a projector on the
  input side left out of the optimizer (GT821 stays at the optimizer), the teacher under
  ``no_grad`` or detached, a consistency target from the student itself.
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
    "(d > 0).float() * torch.log(torch.sigmoid(d) + 1e-10)",  # weighted element by element
])
def test_guard_that_drowns_nothing_or_no_sigmoid_is_not_reported(run_script, loss):
    res = run_script(BPR.replace("LOSS", loss))
    assert res.code == 0, res.err
    assert _lines(res, "GT900") == [], res.findings


OPT = """
import torch
import torch.nn as nn
torch.manual_seed(0)


class Belief(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-8):
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["v"] = torch.zeros_like(p)
                v = state["v"]
                v.mul_(0.9).addcmul_(p.grad, p.grad, value=0.1)
                DENOM
                p.add_(p.grad / denom, alpha=-group["lr"])


model = nn.Linear(4, 1)
opt = Belief(model.parameters())
for step in range(2):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

VIEW = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Linear(4, 2)


def direction(x):
    x = x.clone().requires_grad_(True)
    model(x).pow(2).sum().backward()
    grad = x.grad * 1
    flat = grad.reshape(len(grad), -1)
    NORM
    return flat.reshape(grad.shape) * grad.sign()


x = torch.randn(3, 4)
for _ in range(2):
    x = x + 0.1 * direction(x)
"""


def test_in_place_result_used_as_value_on_optimizer_state_is_named(run_script):
    src = OPT.replace("DENOM", "denom = v.add_(group['eps']).sqrt() + 0.0  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT901") == [marked_line(src)], res.findings
    assert res.findings[0]["code"] == "GT901", res.findings


def test_in_place_result_used_as_value_on_a_view_is_named(run_script):
    src = VIEW.replace("NORM", "flat = flat.abs_() * 2.0  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT901") == [marked_line(src)], res.findings
    assert res.findings[0]["code"] == "GT901", res.findings


@pytest.mark.parametrize("src", [
    OPT.replace("DENOM", "denom = v.add(group['eps']).sqrt()"),  # the fix
    OPT.replace("DENOM", "denom = v.sqrt().add_(group['eps'])"),  # in place on a temporary
    OPT.replace("DENOM", "other = torch.ones_like(v)\n                denom = other.add_(1.0)"
                ".sqrt()"),  # a fresh local, not the optimizer's state, and no view
    VIEW.replace("NORM", "flat = flat.abs() * 2.0"),  # the fix
    VIEW.replace("NORM", "flat = flat.abs_().mul_(2.0)"),  # chained in place: meant
    VIEW.replace("NORM", "flat = flat.clone()\n    flat = flat.abs_() * 2.0"),  # no view
])
def test_in_place_value_on_a_temporary_or_own_copy_is_not_reported(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT901") == [], res.findings


KD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 3)

    def encode(self, x):
        return self.body(x)


student, teacher, proj = nn.Linear(4, 3), Teacher(), nn.Linear(3, 3)
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, student.parameters()), lr=0.1)  # <- optimizer


def distill(x, target):
    return F.LOSS(OUT, target)


def train(student, teacher, opt):
    for step in range(2):
        x = torch.randn(8, 4)
        TARGET
        loss = distill(x, t)
        opt.zero_grad()
        loss.backward()
        opt.step()


train(student, teacher, opt)
"""


def _kd(target: str, loss: str = "l1_loss", out: str = "student(x)") -> str:
    return KD.replace("TARGET", target).replace("LOSS", loss).replace("OUT", out)


@pytest.mark.parametrize("loss", ["l1_loss", "mse_loss"])
def test_teacher_target_computed_with_grad_is_named(run_script, loss):
    src = _kd("t = teacher.encode(x)  # <- cause", loss)
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT821") == [marked_line(src)], res.findings
    assert res.findings[0]["line"] == marked_line(src), res.findings


def test_layer_left_out_on_the_input_side_keeps_the_optimizer_line(run_script):
    src = _kd("with torch.no_grad():\n            t = teacher.encode(x)", out="proj(student(x))")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT821") == [marked_line(src, "# <- optimizer")], res.findings


@pytest.mark.parametrize("target", [
    "with torch.no_grad():\n            t = teacher.encode(x)",  # the fix
    "t = teacher.encode(x).detach()",  # the fix, spelled as a detach
    "t = student(x + 0.1)",  # a consistency target: no leaves of its own
])
def test_target_without_graph_or_leaves_of_its_own_is_silent(run_script, target):
    res = run_script(_kd(target))
    assert res.code == 0, res.err
    assert _lines(res, "GT821") == [], res.findings
