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
