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
