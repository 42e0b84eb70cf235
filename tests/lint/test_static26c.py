"""Readings of docs/triage/static26c.md, each in spellings the real-world cases do not use, as a
buggy twin that real torch fails on and a correct look-alike that runs; the checker reports the
first and stays silent on the second."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

MULTI = (RuntimeError, "returns multiple views")

HEADS = '''
def to_heads(t, n):
    b, l, c = t.shape
    return t.view(b, l, n, c // n).transpose(1, 2)
def copied_heads(t, n):
    b, l, c = t.shape
    return t.reshape(b, l, n, c // n).clone()
class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
    def forward(self, x):
        a, g = self.proj(x).chunk(2, dim=-1)
        a = HELPER(a, 2)
        a.mul_(0.5)
        return (a.transpose(1, 2).reshape(x.shape) * g).sum()
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT608 through a helper of the file whose return is a view of its parameter (heads made
    # from a chunk piece). Look-alike: the helper returns a copy
    "helper-returns-view-of-chunk-piece": (
        Shape(HEADS.replace("HELPER", "copied_heads") + '''
Mixer()(torch.randn(2, 3, 8)).backward()
''', "GT608"),
        Shape(HEADS.replace("HELPER", "to_heads") + '''
Mixer()(torch.randn(2, 3, 8)).backward()
''', "GT608", 14, raises=MULTI)),
    # GT608 through `torch.flatten` of a split piece (a view: the piece is contiguous), the
    # split tensor made by `torch.bmm` of a layer's output. Look-alike: the piece is cloned
    "flatten-of-split-piece-masked": (Shape('''
def score(layer, x, y):
    h = torch.bmm(layer(x), y)
    first, rest = torch.split(h, 2, dim=0)
    flat = torch.flatten(first, 1).clone()
    flat[flat < 0] = 0
    return flat.sum() + rest.sum()
score(nn.Linear(3, 4), torch.randn(4, 5, 3), torch.randn(4, 4, 2)).backward()
''', "GT608"), Shape('''
def score(layer, x, y):
    h = torch.bmm(layer(x), y)
    first, rest = torch.split(h, 2, dim=0)
    flat = torch.flatten(first, 1)
    flat[flat < 0] = 0
    return flat.sum() + rest.sum()
score(nn.Linear(3, 4), torch.randn(4, 5, 3), torch.randn(4, 4, 2)).backward()
''', "GT608", 5, raises=MULTI)),
    # GT608: a method reshapes an unbound row into heads with `torch.reshape`, then scales it
    # in place. Look-alike: out of place
    "torch-reshape-of-unbound-row-scaled": (Shape('''
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 12)
    def forward(self, x):
        left, right = self.fc(x).view(-1, 2, 6).unbind(1)
        left = torch.reshape(left, (-1, 2, 3))
        left = left * 2
        return left.sum() + right.sum()
Pair()(torch.randn(4, 6)).backward()
''', "GT608"), Shape('''
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 12)
    def forward(self, x):
        left, right = self.fc(x).view(-1, 2, 6).unbind(1)
        left = torch.reshape(left, (-1, 2, 3))
        left *= 2
        return left.sum() + right.sum()
Pair()(torch.randn(4, 6)).backward()
''', "GT608", 8, raises=MULTI)),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
