"""The facts of docs/triage/recall41c.md (session 41): a module built by a class or a factory
function of another file of the project is known as a module (NOTE [foreign module kinds]), and
GT438 reads a factory-built module as a construction of its class (NOTE [module built by a
factory]). Each pair is a correct project the checker must leave alone and a buggy twin it
must report on its line, in other names and shapes than the real-world cases; every project
runs on real torch."""
from __future__ import annotations

import runpy
import sys

import pytest

torch = pytest.importorskip("torch")

# a project's library file: a module class, a plain class, and factories of both
PARTS = '''
from torch import nn


class Stem(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(3, width)

    def forward(self, x):
        return self.proj(x).relu()


class Knobs:
    def __init__(self):
        self.requires_grad = True
        self.width = 5


def new_stem(width=5):
    if width > 8:
        return Stem(width)
    stem = Stem(width)
    return stem


def frozen_stem(width=5):
    stem = Stem(width)
    for p in stem.parameters():
        p.requires_grad_(False)
    return stem


def new_knobs():
    return Knobs()


class Noisy(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.proj(x))
'''

# GT407 through a factory of another file: `stem.requires_grad = False` on what `new_stem()`
# returns (a module: freezes nothing). Look-alike: the same attribute set on what
# `new_knobs()` returns, a plain object of the project whose own code reads it
FLAG = '''
import torch

from parts import {factory}

thing = {factory}()
thing.requires_grad = False
FROZEN = {frozen}
'''

# GT438 through a factory of another file: the stem built by `new_stem()` runs in the
# backward-and-step loop, the optimizer holds the head only: the stem never changes.
# Look-alikes: the optimizer holds both; the factory freezes what it builds
TRAIN = '''
import torch
import torch.nn.functional as F
from torch import nn

import parts

stem = parts.{factory}(5)
head = nn.Linear(5, 2)
opt = torch.optim.SGD({params}, lr=0.1)
before = [p.detach().clone() for p in stem.parameters()]
for _ in range(3):
    x, y = torch.randn(6, 3), torch.randn(6, 2)
    loss = F.mse_loss(head(stem(x)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
MOVED = not all(torch.equal(a, b) for a, b in zip(before, stem.parameters()))
'''


# GT516 with a module class of another file (known as a module now): the loop trains the
# noisy block, then puts it in eval mode for a scored pass and never back: from the second
# pass on it trains with dropout off. Look-alike: the loop trains the head only and runs the
# block only under `no_grad` for scoring: its mode is never a training mode (the GT516 forward
# site is a call with grad on)
MODES = '''
import torch
import torch.nn.functional as F
from torch import nn

from parts import Noisy

noisy = Noisy(dropout=0.5)
head = nn.Linear(4, 1)
opt = torch.optim.SGD([*noisy.parameters(), *head.parameters()], lr=0.1)
SEEN = []
for epoch in range(2):
    x, y = torch.randn(5, 4), torch.randn(5, 1)
    SEEN.append(noisy.training)
    loss = F.mse_loss(head({feed}), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    noisy.eval()
    with torch.no_grad():
        score = head(noisy(torch.randn(3, 4))).mean()
'''


def _project(root, main: str):  # type: ignore[no-untyped-def]
    (root / "parts.py").write_text(PARTS.lstrip("\n"))
    (root / "main.py").write_text(main.lstrip("\n"))
    return root / "main.py"


def _lines(path, code: str) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path.parent)], Settings()).findings
            if f.code == code]


def _run(path, monkeypatch) -> dict:  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(path.parent))
    try:
        return runpy.run_path(str(path))
    finally:  # the project's `parts` must not stay imported for the next test
        sys.modules.pop("parts", None)


def test_flag_set_on_a_plain_object_from_a_factory_is_silent(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, FLAG.format(factory="new_knobs",
                                          frozen="thing.requires_grad is False"))
    assert _lines(path, "GT407") == []
    assert _run(path, monkeypatch)["FROZEN"]  # the plain object holds what was set


def test_flag_set_on_a_module_from_a_factory_is_reported(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, FLAG.format(
        factory="new_stem", frozen="not any(p.requires_grad for p in thing.parameters())"))
    assert _lines(path, "GT407") == [6]
    assert not _run(path, monkeypatch)["FROZEN"]  # nothing was frozen


@pytest.mark.parametrize("factory,params,moved", [
    ("new_stem", "[*stem.parameters(), *head.parameters()]", True),
    ("frozen_stem", "head.parameters()", False),
])
def test_factory_module_trained_or_kept_fixed_on_purpose_is_silent(
        tmp_path, monkeypatch, factory: str, params: str, moved: bool) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, TRAIN.format(factory=factory, params=params))
    assert _lines(path, "GT438") == []
    assert _run(path, monkeypatch)["MOVED"] is moved


def test_factory_module_left_out_of_the_optimizer_is_reported(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, TRAIN.format(factory="new_stem", params="head.parameters()"))
    assert _lines(path, "GT438") == [9]
    assert not _run(path, monkeypatch)["MOVED"]


def test_block_only_scored_under_no_grad_after_eval_is_silent(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, MODES.format(feed="x"))
    assert _lines(path, "GT516") == []
    assert _run(path, monkeypatch)["SEEN"] == [True, False]  # never trained: no matter


def test_block_trained_after_eval_left_on_is_reported(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = _project(tmp_path, MODES.format(feed="noisy(x)"))
    assert _lines(path, "GT516") == [18]
    assert _run(path, monkeypatch)["SEEN"] == [True, False]  # trained in eval mode
