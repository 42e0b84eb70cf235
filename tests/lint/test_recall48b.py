"""Session 48, helper recall48b: static facts that generalise (issue 13 part 3). Each fact: a
buggy twin reported on the cause's line and silent look-alikes, in words of no corpus."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [trained and evaluated in one mode]: a reader model fitted round by round, scored under
# no_grad in the same mode it was fitted in (nothing ever calls eval() or train())
ROUNDS = '''
import torch
import torch.nn as nn


class Reader(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 12), nn.Dropout(0.3), nn.Linear(12, 2))

    def forward(self, a):
        return self.body(a)


def run(reader, shelf, probe, rounds, opts):
    tool = torch.optim.Adam(reader.parameters(), lr=1e-3)
    for r in range(rounds):
        for a, b in shelf:
            tool.zero_grad()
            torch.nn.functional.cross_entropy(reader(a), b).backward()
            tool.step()
        {switch}if opts.score:
            for a, b in probe:
                with torch.no_grad():
                    hits = (reader(a).argmax(1) == b).sum()


run(Reader(), [], [], 2, None)
'''


def test_trained_then_scored_without_a_switch():
    """The twin: the scoring loop (under an `if`) runs the reader in its training mode."""
    assert _found(ROUNDS.format(switch=""), "GT550") == [23]


@pytest.mark.parametrize("switch", [
    "reader.eval()\n        ",  # switched before the scoring
    "reader.train(False)\n        ",
])
def test_switched_before_scoring_is_silent(switch):
    assert _found(ROUNDS.format(switch=switch), "GT550") == []


def test_switched_elsewhere_in_the_function_is_silent():
    """A switch anywhere in the function (here at its top, before training) is a mode the
    author manages: the never-switched fact does not hold."""
    src = ROUNDS.format(switch="").replace(
        "    tool = torch.optim", "    reader.eval()\n    tool = torch.optim")
    assert _found(src, "GT550") == []


def test_switched_by_a_helper_is_silent():
    src = ROUNDS.format(switch="settle(reader)\n        ") + '''

def settle(m):
    m.eval()
'''
    assert _found(src, "GT550") == []


def test_mode_free_model_is_silent():
    """No dropout nor batch norm: both modes compute the same."""
    src = ROUNDS.format(switch="").replace("nn.Dropout(0.3), ", "")
    assert _found(src, "GT550") == []


def test_scored_model_not_the_trained_one_is_silent():
    src = ROUNDS.format(switch="").replace("hits = (reader(a)", "hits = (opts.judge(a)")
    assert _found(src, "GT550") == []


def test_scoring_loop_that_backpropagates_is_silent():
    src = ROUNDS.format(switch="").replace(
        "hits = (reader(a).argmax(1) == b).sum()",
        "hits = (reader(a).argmax(1) == b).sum()\n"
        "                torch.nn.functional.cross_entropy(reader(a), b).backward()")
    assert _found(src, "GT550") == []


def test_train_call_then_scoring_under_an_if():
    """The explicit `train()` path reads the loop under an `if` too."""
    src = ROUNDS.format(switch="").replace("        for a, b in shelf:",
                                           "        reader.train()\n        for a, b in shelf:")
    assert _found(src, "GT550") == [24]


# NOTE [installed forwards] and NOTE [backpropagated through callers]: a feature tower whose
# pooling method runs under inference_mode is installed as the tower's forward; a probe
# trains a head on it through a method whose loss the script backpropagates
TOWER = '''
import functools
import torch
import torch.nn as nn


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv1d(2, 6, 3)

    {deco}
    def pooled(self, s, k=2):
        return self.stem(s)[..., :k]

    def forward(self, s):
        return self.stem(s)


class Probe(nn.Module):
    def __init__(self, tower, width):
        super().__init__()
        self.tower, self.head = tower, nn.Linear(width, 1)

    def fit_loss(self, s, t):
        return ((self.head(self.tower(s).flatten(1)) - t) ** 2).mean()


tower = Tower()
tower.forward = {install}
tower.requires_grad_(False)
probe = Probe(tower, 12)
tool = torch.optim.SGD(probe.head.parameters(), lr=0.1)
{use}
'''
TRAIN = '''for s, t in []:
    tool.zero_grad()
    err = probe.fit_loss(s, t)
    err.backward()
    tool.step()'''


def _tower(deco="@torch.inference_mode()", install="functools.partial(tower.pooled, k=2)",
           use=TRAIN):
    return TOWER.format(deco=deco, install=install, use=use)


@pytest.mark.parametrize("install", ["functools.partial(tower.pooled, k=2)", "tower.pooled"])
def test_inference_method_installed_as_forward(install):
    """The twin: the decorated method is the tower's forward; the probe's loss method runs it
    and the script backpropagates that loss."""
    assert _found(_tower(install=install), "GT211") == [12]


def test_installed_method_under_no_grad_is_silent():
    assert _found(_tower(deco="@torch.no_grad()"), "GT211") == []


def test_another_method_installed_is_silent():
    src = _tower(install="tower.other").replace(
        "    def forward(self, s):", "    def other(self, s):\n        return s\n\n"
                                     "    def forward(self, s):")
    assert _found(src, "GT211") == []


def test_loss_method_not_backpropagated_is_silent():
    """The caller reads the method's value as a number; the backward is of another loss."""
    use = TRAIN.replace("err = probe.fit_loss(s, t)\n    err.backward()",
                        "err = probe.fit_loss(s, t)\n    print(err.item())\n"
                        "    other = probe.head(t).sum()\n    other.backward()")
    assert _found(_tower(use=use), "GT211") == []


def test_loss_method_run_under_no_grad_is_silent():
    use = TRAIN.replace("    err = probe.fit_loss(s, t)",
                        "    with torch.no_grad():\n        err = probe.fit_loss(s, t)")
    assert _found(_tower(use=use), "GT211") == []


def test_forward_under_inference_mode_trained_through_a_caller():
    """Without any installation: the decorated `forward` runs in a method whose returned loss
    the script backpropagates (two calls out: `step` returns `fit_loss`'s value)."""
    src = _tower(deco="", install="tower.forward").replace(
        "    def forward(self, s):", "    @torch.inference_mode()\n    def forward(self, s):")
    src = src.replace("    def fit_loss(self, s, t):",
                      "    def step(self, s, t):\n        return self.fit_loss(s, t)\n\n"
                      "    def fit_loss(self, s, t):").replace("probe.fit_loss(s, t)",
                                                            "probe.step(s, t)")
    assert _found(src, "GT211") == [16]
