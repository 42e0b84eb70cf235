"""A LightningModule's `training_step` that cuts the loss it returns (NOTE [Lightning's
backward]): twins and look-alikes, in-process. On lightning 2.6 the re-wrapped loss trains
nothing and the detached one raises the element-0 error (checked by hand with a Trainer)."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source

LIT = '''
import torch
import torch.nn as nn
import lightning as L


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1){init}

    def training_step(self, batch, idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        {tail}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
'''
MANUAL = "\n        self.automatic_optimization = False"


def _found(init: str, tail: str) -> list[tuple[str, int]]:
    src = textwrap.dedent(LIT.format(init=init, tail=tail))
    return [(f.code, f.line) for f in check_source(src, "m.py") if f.code.startswith("GT1")]


def test_a_cut_in_the_returned_loss_is_found():
    assert _found("", "return torch.tensor(loss.item(), requires_grad=True)") == [("GT102", 15)]
    assert _found("", "return loss.detach()") == [("GT107", 15)]
    assert _found("", 'return {"loss": loss.detach(), "n": len(x)}') == [("GT107", 15)]
    assert _found("", "loss = torch.tensor(loss.item(), requires_grad=True)\n"
                      "        return loss") == [("GT102", 15)]


def test_the_message_says_what_lightning_does():
    src = textwrap.dedent(LIT.format(init="", tail="return torch.tensor(loss.item(), "
                                                   "requires_grad=True)"))
    (f,) = [f for f in check_source(src, "m.py") if f.code == "GT102"]
    assert "forced on it: `backward()` on it runs and no parameter gets a gradient" in f.message
    src = textwrap.dedent(LIT.format(init="", tail="return loss.detach()"))
    (f,) = [f for f in check_source(src, "m.py") if f.code == "GT107"]
    assert "raises `RuntimeError: element 0" in f.message


def test_manual_optimization_a_number_and_a_plain_module_stay_silent():
    assert _found(MANUAL, "self.manual_backward(loss)\n        return loss.detach()") == []
    assert _found("", "return loss.item()") == []  # Lightning refuses it by itself
    assert _found("", "return loss") == []
    plain = LIT.replace("L.LightningModule", "nn.Module").format(
        init="", tail="loss.backward()\n        return loss.detach()")
    assert [f.code for f in check_source(textwrap.dedent(plain), "m.py")
            if f.code.startswith("GT1")] == []


UNFREEZE = '''
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
for p in model{part}.parameters():
    p.requires_grad = False
opt = torch.optim.Adam({params}, lr=1e-3)
for epoch in range(6):
    if epoch == 3:
        for p in model{part}.parameters():
            p.requires_grad = True{added}
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''
TRAINABLE = "[p for p in model.parameters() if p.requires_grad]"
ADDED = '\n        opt.add_param_group({"params": model[0].parameters()})'


def _unfrozen(part: str, params: str = TRAINABLE, added: str = "") -> list[tuple[str, int]]:
    src = UNFREEZE.format(part=part, params=params, added=added)
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), "m.py")
            if f.code == "GT410"]


def test_a_part_unfrozen_by_index_after_a_trainable_only_optimizer_is_found():
    assert _unfrozen("[0]") == [("GT410", 12)]
    assert _unfrozen("[:1]") == [("GT410", 12)]


def test_an_optimizer_over_all_or_a_group_added_stays_silent():
    assert _unfrozen("[0]", params="model.parameters()") == []
    assert _unfrozen("[0]", added=ADDED) == []


LOOP = '''
import torch
import torch.nn as nn


def fit(model, loader, other):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
    ce = nn.CrossEntropyLoss()
    for x, y in loader:
        opt.zero_grad()
        loss = ce(model(x), y)
        {body}
        print(f"{{loss:.4f}}")
'''


def _loop(body: str) -> list[tuple[str, int]]:
    src = textwrap.dedent(LOOP.format(body=body))
    return [(f.code, f.line) for f in check_source(src, "m.py") if f.code in ("GT544", "GT545")]


def test_a_loop_that_never_steps_or_never_backpropagates_is_found():
    assert _loop("loss.backward()") == [("GT544", 13)]
    assert _loop("pass") == [("GT545", 12)]
    assert _loop("opt.step()") == [("GT545", 12)]  # a step with no gradient moves nothing


def test_a_loop_that_updates_stays_silent():
    assert _loop("loss.backward()\n        opt.step()") == []
    assert _loop("loss.backward()\n        other.step()") == []  # another optimizer may train here
    # the schedule stepped where the optimizer's step belongs: that line (unseen52b)
    assert _loop("loss.backward()\n        sched.step()") == [("GT544", 14)]
    assert _loop("loss.backward()\n        step_all(opt)") == []  # may step it
    assert _loop("loss.backward()\n        for p in model.parameters():\n"
                 "            p.data -= 0.1 * p.grad") == []  # an update by hand
    assert _loop("grads = torch.autograd.grad(loss, list(model.parameters()))") == []
