"""Session 49, helper recall49b: static facts that generalise (issue 13 part 3). Each fact: a
buggy twin reported on the cause's line and silent look-alikes, in words of no corpus."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [layers a construction rules out]: a scorer whose gate table is read only in the arm of
# one mode; the wrapped instance is built in the other mode
GATES = '''
import enum
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Mode(enum.Enum):
    TABLE = 1
    RAMP = 2


class Scorer(nn.Module):
    def __init__(self, width, mode=Mode.TABLE):
        super().__init__()
        self.mode = mode
        self.proj = nn.Linear(width, width)
        self.gates = nn.Embedding(8, width)

    def weigh(self, h):
        if self.mode == Mode.TABLE:
            return h * self.gates(torch.arange(h.shape[0]))
        return h * torch.linspace(0, 1, h.shape[0])[:, None]

    def forward(self, h):
        return self.weigh(self.proj(h))


def fit(batches):
    net = Scorer(4, {mode})
    net = DistributedDataParallel(net{extra})
    tool = torch.optim.SGD(net.parameters(), lr=0.1)
    for h in batches:
        tool.zero_grad()
        net(h).sum().backward()
        tool.step()
'''


def test_layer_read_only_in_a_ruled_out_arm():
    """The twin: built with `Mode.RAMP`, the gate table is never run; GT450 at its line."""
    assert _found(GATES.format(mode="mode=Mode.RAMP", extra=""), "GT450") == [18]


def test_layer_ruled_out_positionally_and_through_a_move():
    """The twin, the member passed positionally and the model moved before the wrap."""
    src = GATES.format(mode="Mode.RAMP).to('cpu'", extra="")
    assert _found(src, "GT450") == [18]


@pytest.mark.parametrize("mode,extra", [
    ("mode=Mode.TABLE", ""),                       # the arm that reads the table runs
    ("", ""),                                      # the default is that arm's member
    ("mode=Mode.RAMP", ", find_unused_parameters=True"),
    ("mode=pick()", ""),                           # the member is not known
])
def test_layer_in_an_arm_that_may_run(mode, extra):
    assert _found(GATES.format(mode=mode, extra=extra), "GT450") == []


def test_mode_changed_after_construction():
    """Another statement sets the mode: the arm may run."""
    src = GATES.format(mode="mode=Mode.RAMP", extra="").replace(
        "    tool = torch", "    net.module.mode = Mode.TABLE\n    tool = torch")
    assert _found(src, "GT450") == []


def test_layer_also_read_outside_the_arm():
    src = GATES.format(mode="mode=Mode.RAMP", extra="").replace(
        "        return self.weigh(self.proj(h))",
        "        return self.weigh(self.proj(h)) + self.gates.weight.sum()")
    assert _found(src, "GT450") == []


def test_layer_built_only_in_its_arm():
    """The table built only in the table mode: nothing unused (the realworld look-alike's
    shape, in other words)."""
    src = GATES.format(mode="mode=Mode.RAMP", extra="").replace(
        "        self.gates = nn.Embedding(8, width)",
        "        if mode == Mode.TABLE:\n            self.gates = nn.Embedding(8, width)")
    assert _found(src, "GT450") == []


@pytest.mark.parametrize("klass,test", [
    ("class Mode(enum.Enum):", "if self.mode == 1:"),         # a member against a number
    ("class Mode(enum.Enum):", "if self.mode:"),              # a member's truth
    ("class Mode(int, enum.Enum):", "if self.mode == Mode.TABLE:"),  # a mix-in: not read
])
def test_member_against_another_value_decides_nothing(klass, test):
    src = GATES.format(mode="mode=Mode.RAMP", extra="").replace(
        "class Mode(enum.Enum):", klass).replace("if self.mode == Mode.TABLE:", test)
    assert _found(src, "GT450") == []
