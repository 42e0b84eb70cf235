"""Session 52, helper recall52b: static recall on real-world misses. Each shape: a buggy twin
with its code and lines, silent look-alikes (written in another style than the real-world
case they come from)."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source


def _found(src: str, code: str) -> list[int]:
    return sorted(f.line for f in check_source(textwrap.dedent(src)) if f.code == code)


# NOTE [saved before the arm]: a norm built by a helper with two returns saves the input
# before an `if`; one arm writes it in place (checked on torch 2.13: both norms raise)
MIXER = '''
import torch
from torch import nn


def norm_layer(dim, kind):
    if kind == "group":
        return nn.GroupNorm(2, dim)
    return {other}


class Mixer(nn.Module):
    def __init__(self, dim, kind="layer", scaled=False):
        super().__init__()
        self.pre = norm_layer(dim, kind)
        self.mix = nn.Linear(dim, dim)
        self.scaled = scaled

    def forward(self, x):
        y = self.mix(self.pre(x))
        {between}
        if self.scaled:
            x = x + 0.5 * y
        else:
            {write}
        return x
'''


def _mixer(other: str = "nn.LayerNorm(dim)", between: str = "pass",
           write: str = "x.add_(y)") -> list[int]:
    return _found(MIXER.format(other=other, between=between, write=write), "GT605")


def test_arm_writes_input_a_helper_built_norm_saved():
    assert _mixer() == [25]


def test_arm_augmented_write_after_norm():
    assert _mixer(write="x += y") == [25]


def test_arm_writes_out_of_place_is_silent():
    assert _mixer(write="x = x + y") == []


def test_input_rebound_before_the_arm_is_silent():
    assert _mixer(between="x = x * 2") == []


def test_helper_return_that_saves_nothing_is_silent():
    # nn.Identity hands its input back and saves nothing: not every return saves `x`
    assert _mixer(other="nn.Identity()") == []
