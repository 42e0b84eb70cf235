"""runtime46a on real torch, one process each (gloo, world size 1), tiny models.

- NOTE [after the DDP wrap] (kind parameter-replaced-after-ddp-wrap, shown as its
  static twin GT614): a parameter or layer added to ``ddp.module`` after the wrap is trained
  and never all-reduced. Twins: a helper registering extra weights called after the wrap (named
  at the call, in the function that built the wrapper), a new parameter assigned after the
  wrap. Look-alikes: the helper called before the wrap; the model wrapped again after the
  change.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

WRAPPED = """
import os, tempfile
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

class Gate(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.mix = None

    def add_mix(self):
        self.mix = nn.Parameter(torch.eye(self.dim) * 0.5)

    def forward(self, x):
        return x if self.mix is None else x + x @ self.mix

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.gate = Gate(4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.gate(torch.relu(self.body(x)))).squeeze(-1)

def add_all_mixes(model):
    for m in model.modules():
        if isinstance(m, Gate):
            m.add_mix()

def main():
    path = os.path.join(tempfile.mkdtemp(), "store")
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="file://" + path, rank=0, world_size=1)
    torch.manual_seed(0)
    net = Net()
    BEFORE
    model = DDP(net)
    AFTER
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(4):
        x = torch.randn(8, 4)
        loss = (model(x) - x.sum(-1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()
    print("done")

main()
"""
HELPER_AFTER = WRAPPED.replace("BEFORE", "pass").replace(
    "AFTER", "add_all_mixes(model.module)  # <- cause")
HELPER_BEFORE = WRAPPED.replace("BEFORE", "add_all_mixes(net)").replace("AFTER", "pass")
REWRAPPED = WRAPPED.replace("BEFORE", "pass").replace(
    "AFTER", "add_all_mixes(model.module)\n    model = DDP(model.module)")
REPLACED = WRAPPED.replace("BEFORE", "pass").replace(
    "AFTER", "model.module.gate.mix = nn.Parameter(torch.eye(4))  # <- cause")


def _first(res):
    return [(f["code"], f["line"]) for f in res.findings][:1]


def test_weights_added_by_a_helper_after_the_wrap_named_at_the_call(run_script):
    res = run_script(HELPER_AFTER)
    assert res.code == 0, res.err
    assert _first(res) == [("GT614", marked_line(HELPER_AFTER))], res.findings


def test_parameter_assigned_after_the_wrap_named_at_the_assignment(run_script):
    res = run_script(REPLACED)
    assert res.code == 0, res.err
    assert _first(res) == [("GT614", marked_line(REPLACED))], res.findings


def test_weights_added_before_the_wrap_are_silent(run_script):
    res = run_script(HELPER_BEFORE)
    assert res.code == 0, res.err
    assert "GT614" not in res.codes(), res.findings


def test_model_wrapped_again_after_the_change_is_silent(run_script):
    res = run_script(REWRAPPED)
    assert res.code == 0, res.err
    assert "GT614" not in res.codes(), res.findings


# NOTE [guard lets a frozen module into DDP] (crash, kind ddp-wraps-frozen-module, shown as GT456)
PER_CHILD = """
import os, tempfile
import torch
import torch.distributed as dist
import torch.nn as nn

class PerChildDDP(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        for name, child in list(model._modules.items()):
            if GUARD:
                model._modules[name] = nn.parallel.DistributedDataParallel(child)

if not dist.is_initialized():
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tempfile.mkdtemp(), "s"),
                            rank=0, world_size=1)
net = nn.Module()
net.body = nn.Linear(4, 4)
net.teacher = nn.Linear(4, 4).requires_grad_(False)
try:
    PerChildDDP(net)
finally:
    dist.destroy_process_group()
print("wrapped")
"""
GUARD_BY_COUNT = PER_CHILD.replace(
    "if GUARD:", "if len(list(child.parameters())) > 0:  # <- cause")
GUARD_BY_GRAD = PER_CHILD.replace(
    "if GUARD:", "if any(p.requires_grad for p in child.parameters()):")
UNGUARDED = PER_CHILD.replace("if GUARD:", "if True:").replace(
    "model._modules[name] = nn.parallel.DistributedDataParallel(child)",
    "model._modules[name] = nn.parallel.DistributedDataParallel(child)  # <- cause")


def test_guard_on_having_parameters_named_when_ddp_refuses_a_frozen_child(run_script):
    res = run_script(GUARD_BY_COUNT)
    assert res.code != 0
    assert _first(res) == [("GT456", marked_line(GUARD_BY_COUNT))], res.findings


def test_unguarded_wrap_of_a_frozen_child_named_at_the_ddp_call(run_script):
    res = run_script(UNGUARDED)
    assert res.code != 0
    assert _first(res) == [("GT456", marked_line(UNGUARDED))], res.findings


def test_guard_on_requires_grad_is_silent(run_script):
    res = run_script(GUARD_BY_GRAD)
    assert res.code == 0, res.err
    assert not res.findings, res.findings
