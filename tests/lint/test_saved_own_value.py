"""GT605 read on one statement: the value written in place into `x` is computed by a layer that
saved `x` itself (`x += self.attn(self.ln_1(x))`, nanoGPT#72). Each buggy twin is reported on its
line and its backward raises "modified by an inplace operation" on real torch; each look-alike
stays silent and trains.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

SAVED = "modified by an inplace operation"

BLOCK = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.ln = nn.LayerNorm(4)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = self.fc(x)
{body}

Block()(torch.randn(2, 4)).sum().backward()
"""


def _block(*lines: str) -> str:
    return BLOCK.format(body="\n".join("        " + s for s in lines))


GOOD = [
    _block("x = x + self.fc(self.ln(x))", "return x"),          # out of place
    _block("x += self.drop(x)", "return x"),                    # dropout saves its mask only
    _block("x += self.fc(x.clone())", "return x"),              # the layer saved a copy
    _block("h = x.clone()", "x += self.fc(h)", "return x"),     # the layer saved another tensor
    # the layer's output never reaches backward, so what it saved is never read
    _block("y = self.ln(x)", "x += y.detach()", "return x"),
    _block("x += self.ln(x).detach()", "return x"),
]

BAD = [
    (_block("x += self.fc(self.ln(x))", "return x"), 10),
    (_block("x.add_(self.fc(x))", "return x"), 10),
    (_block("x[:, :2] = self.ln(x)[:, 2:]", "return x"), 10),
    # twins of the detached look-alikes: the output is also used with its history
    (_block("y = self.ln(x)", "x += y.detach()", "return x + y"), 11),
    (_block("x += self.ln(x).detach() + self.ln(x)", "return x"), 10),
]


@pytest.mark.parametrize("i", range(len(GOOD)))
def test_look_alike_is_silent_and_trains(i: int) -> None:
    shape = Shape(GOOD[i], "GT605")
    assert _found(shape) == []
    _run(shape)


@pytest.mark.parametrize("i", range(len(BAD)))
def test_buggy_twin_is_reported_and_raises(i: int) -> None:
    src, line = BAD[i]
    shape = Shape(src, "GT605", line, SAVED)
    assert _found(shape) == [(line, "GT605")]
    _run(shape)
