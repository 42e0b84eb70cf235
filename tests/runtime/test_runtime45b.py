"""runtime45b on real torch, one process, a few steps, tiny models.

- NOTE [NaN loss hunted] (GT825): a loss normalised by a count that is zero on one later batch
  (an all-padding micro-batch): ``0 / 0`` makes that loss NaN, the step writes NaN into the
  weights, and the next hunted backward would name the first op that carries NaN (the ``exp``).
  Named at the division. Silent: the count clamped to one; the NaN loss's step skipped by the
  program (an ``isfinite`` guard), so no step sees a non-finite gradient.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

PADDED = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def loss_of(x, mask):
    ratio = torch.exp(model(x).log_softmax(-1))  # <- exp
    count = COUNT
    return (ratio[:, 0] * mask).sum() / count  # <- cause


for step in range(6):
    x = torch.randn(5, 6)
    mask = torch.zeros(5) if step == 2 else torch.ones(5)
    loss = loss_of(x, mask)
    loss.backward()
    STEP
print(model[0].weight.sum().item())
"""
PLAIN_STEP = """opt.step()
    opt.zero_grad()"""
GUARDED_STEP = """if torch.isfinite(loss):
        opt.step()
    opt.zero_grad()"""


def test_nan_loss_of_a_later_batch_named_at_its_division(run_script):
    src = PADDED.replace("COUNT", "mask.sum()").replace("STEP", PLAIN_STEP)
    res = run_script(src)
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT825", marked_line(src))], res.findings


def test_count_clamped_to_one_is_silent(run_script):
    src = PADDED.replace("COUNT", "mask.sum().clamp(min=1)").replace("STEP", PLAIN_STEP)
    res = run_script(src)
    assert res.code == 0, res.err
    assert not res.findings, res.findings


def test_nan_loss_whose_step_is_skipped_is_silent(run_script):
    src = PADDED.replace("COUNT", "mask.sum()").replace("STEP", GUARDED_STEP)
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT825"], res.findings


SHIM = """
import types
import torch
import torch.nn as nn
torch.manual_seed(0)
bkd = types.SimpleNamespace(
    as_tensor=lambda data, dtype=None: data if isinstance(data, torch.Tensor) else torch.as_tensor(data, dtype=dtype),  # <- shim
    mean=torch.mean)


def to_tensor(values):
    return torch.as_tensor([v * 2 for v in values])  # <- own


model = nn.Linear(4, 2)
x = torch.randn(3, 4)
terms = [model(x).pow(2).mean(), model(x).abs().mean()]
CALL
total.backward()  # <- crash
"""


def test_conversion_shim_named_at_its_caller(run_script):
    src = SHIM.replace("CALL", "total = bkd.mean(bkd.as_tensor(terms))  # <- cause")
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT102", marked_line(src))], res.findings


def test_conversion_shim_handed_a_stacked_tensor_is_silent(run_script):
    res = run_script(SHIM.replace("CALL", "total = bkd.mean(bkd.as_tensor(torch.stack(terms)))"))
    assert res.code == 0, res.err
    assert not res.findings, res.findings


def test_helper_converting_its_own_values_keeps_its_line(run_script):
    src = SHIM.replace("CALL", "total = bkd.mean(to_tensor(terms))")
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT102", marked_line(src, "# <- own"))], res.findings


UNPACK = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Linear(4, 3)


def criterion(out, y):
    loss = nn.functional.cross_entropy(out, y)
    acc = float((out.argmax(1) == y).float().mean())  # <- item
    RETURN


x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
UNPACKING
loss.backward()  # <- crash
"""


def test_results_unpacked_out_of_order_named_at_the_unpacking(run_script):
    src = UNPACK.replace("RETURN", "return acc, loss").replace(
        "UNPACKING", "loss, acc = criterion(model(x), y)  # <- cause")
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT101", marked_line(src))], res.findings


def test_results_unpacked_in_order_are_silent(run_script):
    res = run_script(UNPACK.replace("RETURN", "return acc, loss").replace(
        "UNPACKING", "acc, loss = criterion(model(x), y)"))
    assert res.code == 0, res.err
    assert not res.findings, res.findings


def test_number_unpacked_beside_no_graph_keeps_where_it_was_made(run_script):
    src = UNPACK.replace("RETURN", "return loss.item(), acc  # <- number").replace(
        "UNPACKING", "loss, acc = criterion(model(x), y)")
    res = run_script(src)
    assert res.code != 0
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT101", marked_line(src, "# <- number"))], res.findings


RESUME = """
import io
import torch
import torch.nn as nn
torch.manual_seed(0)


def train(model, opt):
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9)
SCHED
train(model, opt)
buf = io.BytesIO()
torch.save({'model': model.state_dict(), 'opt': opt.state_dict()}, buf)
buf.seek(0)
ckpt = torch.load(buf)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), NEW_LR, momentum=0.9)
model.load_state_dict(ckpt['model'])
opt.load_state_dict(ckpt['opt'])  # <- cause
AFTER
train(model, opt)
"""


def _resume(new_lr: str = "0.001", after: str = "", sched: str = "") -> str:
    return RESUME.replace("NEW_LR", new_lr).replace("AFTER", after).replace("SCHED", sched)


def test_lr_restored_by_the_load_named_at_the_load(run_script):
    src = _resume()
    res = run_script(src)
    assert res.code == 0, res.err
    assert [(f["code"], f["line"]) for f in res.findings][:1] == \
        [("GT899", marked_line(src))], res.findings


@pytest.mark.parametrize("src", [
    _resume(after="for g in opt.param_groups:\n    g['lr'] = 0.001"),
    _resume(new_lr="0.1"),
    _resume(sched="sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)"),
], ids=["lr_set_after_load", "same_lr", "scheduler_in_saved_run"])
def test_resume_keeping_the_intended_lr_is_silent(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT899"], res.findings
