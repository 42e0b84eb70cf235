"""runtime52 on real torch, one process, a few steps, tiny models.

- GT136 (freeze-method-copied-from-sibling): `freeze_decoder()` copied from `freeze_encoder()`
  still freezes `self.encoder`; the run (nothing fails, nothing it measures is wrong by
  itself) leads with the static finding on the method's line, which ran. Look-alike: the method
  freezes `self.decoder` (the fix); a method that freezes the encoder too but also the decoder.
- GT138 (grad-setting-on-frozen-twin): `Head(freeze_last=1)` for the frozen teacher, `Head()` for the
  student whose gradients `cancel_last_gradients()` edits: named at the student's line. Look-alike:
  the setting on the student (the fix).
- GT137 (freeze-names-miss-wrapper-prefix): the freeze loop over a `DataParallel` model's
  `named_parameters()` tests the inner model's prefixes; every name starts with `module.`, so
  nothing is frozen (measured below on torch: the encoder moves). Look-alikes: the keys
  prefixed with `module.` when wrapped (the fix), the freeze before the wrap.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

SIBLING = """
import torch
from torch import nn
torch.manual_seed(0)


def freeze_module(module):
    for p in module.parameters():
        p.requires_grad_(False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.decoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def freeze_encoder(self):
        freeze_module(self.encoder)

    def freeze_decoder(self):
        BODY

    def forward(self, x):
        return self.head(self.decoder(self.encoder(x)))


model = Net()
model.freeze_decoder()
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

WRAPPED = """
import torch
from torch import nn
torch.manual_seed(0)


def train(freeze_mods):
    model = nn.Sequential()
    model.add_module("encoder", nn.Linear(4, 4))
    model.add_module("decoder", nn.Linear(4, 2))
    model = nn.DataParallel(model)
    KEYS
    for name, p in model.named_parameters():
        if any(name.startswith(k) for k in keys):  # <- cause
            p.requires_grad = False
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    before = model.module.encoder.weight.detach().clone()
    for step in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return bool((model.module.encoder.weight - before).abs().max() > 0)


MOVED = train(["encoder."])
"""


def _codes(res: object) -> list[tuple[str, int]]:
    return [(f["code"], f["line"]) for f in res.findings]  # type: ignore[attr-defined]


def test_freeze_method_copied_from_its_sibling_leads(run_script):
    src = SIBLING.replace("BODY", "freeze_module(self.encoder)  # <- cause\n"
                                                "        freeze_module(self.head)")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT136", marked_line(src))], res.findings


@pytest.mark.parametrize("body", [
    "freeze_module(self.decoder)\n        freeze_module(self.head)",  # the fix
    "freeze_module(self.encoder)\n        freeze_module(self.decoder)",  # both on purpose
])
def test_freeze_method_of_its_own_part_is_silent(run_script, body):
    res = run_script(SIBLING.replace("BODY", body))
    assert res.code == 0, res.err
    assert "GT136" not in [c for c, _ in _codes(res)], res.findings


def test_wrapped_names_never_match_the_inner_prefixes(run_script, tmp_path):
    src = WRAPPED.replace("KEYS", "keys = freeze_mods")
    ns: dict = {}
    exec(compile(src, "plain.py", "exec"), ns)
    assert ns["MOVED"] is True  # torch: nothing was frozen, the encoder trains
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT137", marked_line(src))], res.findings


@pytest.mark.parametrize("keys,move", [
    ("keys = ['module.' + k for k in freeze_mods]", False),  # the fix
    ("keys = freeze_mods\n    model = model.module", False),  # the inner model's names
])
def test_wrapped_names_matched_with_the_prefix_are_silent(run_script, keys, move):
    src = WRAPPED.replace("KEYS", keys)
    if "model.module" in keys:
        src = src.replace("model.module.encoder", "model.encoder")
    ns: dict = {}
    exec(compile(src, "plain.py", "exec"), ns)
    assert ns["MOVED"] is move  # torch: the encoder is frozen
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT137" not in [c for c, _ in _codes(res)], res.findings


TWINS = """
import copy
import torch
from torch import nn
torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self, freeze_last=-1):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.last = nn.Linear(4, 4)
        self.freeze_last = freeze_last

    def cancel_last_gradients(self, epoch):
        if epoch >= self.freeze_last:
            return
        for p in self.last.parameters():
            p.grad = None

    def forward(self, x):
        return self.last(self.body(x))


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.teacher_head = TEACHER
        self.student_head = STUDENT
        for p in self.teacher_head.parameters():
            p.requires_grad = False


model = Pair()
opt = torch.optim.SGD(model.student_head.parameters(), lr=0.1)
before = model.student_head.last.weight.detach().clone()
for step in range(3):
    x = torch.randn(8, 4)
    with torch.no_grad():
        t = model.teacher_head(x).softmax(-1)
    loss = -(t * model.student_head(x).log_softmax(-1)).sum(-1).mean()
    opt.zero_grad()
    loss.backward()
    model.student_head.cancel_last_gradients(0)
    opt.step()
MOVED = bool((model.student_head.last.weight - before).abs().max() > 0)
"""


def test_grad_setting_given_to_the_frozen_twin_is_named(run_script):
    src = TWINS.replace("TEACHER", "Head(freeze_last=1)").replace(
        "STUDENT", "Head()  # <- cause")
    ns: dict = {}
    exec(compile(src, "plain.py", "exec"), ns)
    assert ns["MOVED"] is True  # torch: the student's last layer trains from the first step
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT138", marked_line(src))], res.findings


def test_grad_setting_given_to_the_trained_twin_is_silent(run_script):
    src = TWINS.replace("TEACHER", "Head()").replace("STUDENT", "Head(freeze_last=1)")
    ns: dict = {}
    exec(compile(src, "plain.py", "exec"), ns)
    assert ns["MOVED"] is False  # torch: the last layer stays fixed in the first epoch
    res = run_script(src)
    assert res.code == 0, res.err
    assert "GT138" not in [c for c, _ in _codes(res)], res.findings
