"""GT446's helper form (a function repeating the module it is given into a ModuleList or
Sequential) is silent when every call of the helper in the file gives it a parameter-free
module: one activation shared at every position changes nothing. A helper given a layer with
parameters (the buggy twin), or never called in the file, is still reported; checked on real
torch (one shared Linear: `parameters()` lists its weight once)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

torch = pytest.importorskip("torch")

SRC = """
import torch.nn as nn


def repeat(module, n):
    return nn.Sequential(*[module for _ in range(n)])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.acts = repeat({given}, 3)
        self.more = repeat(module={given}, n=2)
"""


def _gt446(src: str) -> list[int]:
    return [f.line for f in check_source(textwrap.dedent(src), "t.py") if f.code == "GT446"]


def test_helper_given_only_activations_is_silent() -> None:
    src = SRC.format(given="nn.ReLU()")
    assert _gt446(src) == []
    ns: dict = {}
    exec(compile(textwrap.dedent(src), "t.py", "exec"), ns)
    assert len(list(ns["Net"]().parameters())) == 0


def test_helper_given_a_layer_with_parameters_is_reported() -> None:
    src = SRC.format(given="nn.Linear(4, 4)")
    assert _gt446(src) == [6]
    ns: dict = {}
    exec(compile(textwrap.dedent(src), "t.py", "exec"), ns)
    assert len(list(ns["Net"]().acts.parameters())) == 2  # one Linear, not three


def test_helper_given_an_activation_and_a_layer_is_reported() -> None:
    src = SRC.format(given="nn.ReLU()").replace("repeat(module=nn.ReLU(), n=2)",
                                                 "repeat(module=nn.Linear(4, 4), n=2)")
    assert _gt446(src) == [6]


def test_helper_never_called_in_the_file_is_reported() -> None:
    src = SRC.format(given="nn.ReLU()").split("class Net")[0]
    assert _gt446(src) == [6]
