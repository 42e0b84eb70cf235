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


# NOTE [left at a false default]: a trainer class wraps its critic with the flag its own
# constructor defaults to False; the file builds it without the flag
CRITIC = '''
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.rebuild = nn.Linear(4, 4)

    def forward(self, x, rebuild=True):
        h = self.body(x)
        extra = None
        if rebuild:
            extra = (self.rebuild(h) - x).pow(2).mean()
        return h.sum(), extra


class Duel:
    def __init__(self, critic, lr=0.1, search=False):
        self.critic = DistributedDataParallel(critic, find_unused_parameters=search)
        self.opt = torch.optim.SGD(critic.parameters(), lr=lr)

    def round(self, x):
        score, _ = self.critic(x, rebuild=False)
        self.opt.zero_grad()
        score.backward()
        self.opt.step()


duel = Duel(Critic(){args})
'''


def test_flag_left_at_its_false_default():
    """The twin: every construction keeps `search=False`; GT451 at the default."""
    assert _found(CRITIC.format(args=""), "GT451") == [22]
    assert _found(CRITIC.format(args=", 0.5"), "GT451") == [22]


@pytest.mark.parametrize("args", [
    ", search=True",           # passed by keyword
    ", 0.5, True",             # passed by position
    ", **opts",                # may be passed
])
def test_flag_passed_by_a_call(args):
    assert _found(CRITIC.format(args=args), "GT451") == []


def test_flag_default_true_or_no_call():
    assert _found(CRITIC.format(args="").replace("search=False", "search=True"), "GT451") == []
    src = CRITIC.format(args="").replace("duel = Duel(Critic())\n", "")
    assert _found(src, "GT451") == []


def test_flag_rebound_in_the_constructor():
    src = CRITIC.format(args="").replace(
        "        self.critic = Distrib", "        search = torch.cuda.device_count() > 1\n"
        "        self.critic = Distrib")
    assert _found(src, "GT451") == []
