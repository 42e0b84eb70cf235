"""Session 46, lead: GT614 when the model is wrapped again after the change (the new
DistributedDataParallel hooks the parameters as they are then): silent look-alikes and the
buggy twins beside them."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

MODEL = '''
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = None

    def add_mix(self):
        self.mix = nn.Parameter(torch.eye(4))

    def forward(self, x):
        return x if self.mix is None else x @ self.mix


def add_mixes(model):
    for m in model.modules():
        if isinstance(m, Gate):
            m.add_mix()


def main(net):
    model = DDP(net)
    {change}
    {again}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(2, 4)).sum()
    loss.backward()
    opt.step()
'''
LINE = MODEL.splitlines().index("    {change}") + 1
CHANGES = ["model.module.gate.mix = nn.Parameter(torch.eye(4))", "add_mixes(model.module)"]


def _gt614(change: str, again: str) -> list[int]:
    src = textwrap.dedent(MODEL.format(change=change, again=again))
    return [f.line for f in check_source(src) if f.code == "GT614"]


@pytest.mark.parametrize("change", CHANGES)
def test_change_after_the_wrap_is_reported(change):
    assert _gt614(change, "pass") == [LINE]


@pytest.mark.parametrize("again", ["model = DDP(model.module)", "model = DDP(net)"])
@pytest.mark.parametrize("change", CHANGES)
def test_change_then_a_new_wrap_is_silent(change, again):
    assert _gt614(change, again) == []


@pytest.mark.parametrize("change", CHANGES)
def test_a_wrap_of_another_model_after_the_change_keeps_it(change):
    assert _gt614(change, "other = DDP(nn.Linear(4, 4))") == [LINE]


# GT539: the optimizers held in a dict, stepped through a loop over the dict itself (its keys)
def _gt539(src: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src)) if f.code == "GT539"]


HELD = '''
import torch
from torch import nn

gen, disc = nn.Linear(2, 2), nn.Linear(2, 1)
optims = BUILD


def train(batch):
    loss = disc(gen(batch)).mean()
    loss.backward()
    LOOP
'''
BUILDS = ['{"gen": torch.optim.SGD(gen.parameters(), lr=0.1), "disc": torch.optim.SGD(disc.parameters(), lr=0.1)}',
          'dict(gen=torch.optim.SGD(gen.parameters(), lr=0.1), disc=torch.optim.SGD(disc.parameters(), lr=0.1))']


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("loop", ["for opt in optims:\n        opt.step()",
                                  "[o.zero_grad() for o in optims]",
                                  "any(o['x'].step() for o in optims if 'x' in o)"])
def test_a_loop_over_the_dict_stepping_its_items_is_reported(build, loop):
    src = HELD.replace("BUILD", build).replace("LOOP", loop)
    assert _gt539(src) == [12]


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("loop", ["for opt in optims.values():\n        opt.step()",
                                  "for name, opt in optims.items():\n        opt.step()",
                                  "for name in optims:\n        optims[name].step()",
                                  "for o in optims:\n        o = optims[o]\n        o.step()",
                                  "for name in optims:\n        print(name.upper())"])
def test_a_loop_over_values_items_or_keys_used_as_keys_is_silent(build, loop):
    src = HELD.replace("BUILD", build).replace("LOOP", loop)
    assert _gt539(src) == []


def test_a_dict_with_other_keys_or_built_key_by_key_is_silent():
    by_model = HELD.replace("BUILD", "{gen: torch.optim.SGD(gen.parameters(), lr=0.1)}")
    assert _gt539(by_model.replace("LOOP", "for m in optims:\n        m.zero_grad()")) == []
    rebound = HELD.replace("BUILD", '{"gen": None}').replace(
        "LOOP", "optims = [torch.optim.SGD(gen.parameters())]\n    for o in optims:\n        o.step()")
    assert _gt539(rebound) == []


def test_self_attribute_dicts_follow_every_assignment_in_the_class():
    src = '''
import torch

class T:
    def __init__(self, a, b):
        self.optims = {"a": torch.optim.SGD(a, lr=0.1), "b": torch.optim.SGD(b, lr=0.1)}

    def reset(self, a):
        self.optims = ONE

    def step(self):
        for o in self.optims:
            o.step()
'''
    assert _gt539(src.replace("ONE", '{"a": torch.optim.SGD(a, lr=0.1)}')) == [12]
    assert _gt539(src.replace("ONE", "[torch.optim.SGD(a, lr=0.1)]")) == []


def test_a_clearing_loop_beside_a_stepping_one_is_told_with_the_step():
    both = HELD.replace("BUILD", BUILDS[0]).replace(
        "LOOP", "[o.step() for o in optims]\n    [o.zero_grad() for o in optims]")
    found = [f for f in check_source(textwrap.dedent(both)) if f.code == "GT539"]
    assert [f.line for f in found] == [12]
    assert [r.line for r in found[0].related] == [6, 13]
    alone = HELD.replace("BUILD", BUILDS[0]).replace(
        "LOOP", "[o.zero_grad() for o in optims]\n    [o.step() for o in optims.values()]")
    assert _gt539(alone) == [12]
