"""GT608: in-place writes into the outputs of split/chunk/unbind (or the rows met by iterating a
tensor) of a tensor that carries a graph. Each buggy twin is reported on its line and raises
"... is a view and is being modified inplace. This view is the output of a function that returns
multiple views" on real torch; each look-alike stays silent and runs (NOTE [multi-output
views]).

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

MULTI = "output of a function that returns multiple views"

BLOCK = """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(4, 12)
        self.norm = nn.LayerNorm(12)

    def forward(self, x):
{body}

Block()(torch.randn(2, 3, 4)).sum().backward()
"""


def _block(*lines: str) -> str:
    return BLOCK.format(body="\n".join("        " + s for s in lines))


GOOD = [
    # out of place
    _block("q, k, v = self.qkv(x).split(4, dim=-1)", "q = q * 0.5",
           "return q + k + v"),
    # a piece copied first
    _block("q, k, v = torch.chunk(self.qkv(x), 3, -1)", "q = q.clone()", "q *= 0.5",
           "return q + k + v"),
    # tensor_split is made of slices: its pieces may be written
    _block("q, k, v = self.qkv(x).tensor_split(3, -1)", "q = q.clone()", "q.mul_(0.5)",
           "return q + k + v"),
    # the split tensor has no graph
    _block("q, k, v = x.detach().repeat(1, 1, 3).split(4, -1)", "q *= 0.5",
           "return self.qkv(q + k + v)"),
    # reshape of a non-contiguous piece copies: not followed
    _block("h = self.norm(self.qkv(x))", "q, k, v = h.split(4, -1)", "q = q.reshape(-1)",
           "q *= 0.5", "return k + v + q.sum()"),
    # split and write under no_grad (a piece split with grad on and written under no_grad
    # makes every later read of a piece raise: not read as silent, see test_late_read)
    _block("with torch.no_grad():", "    q, k, v = self.qkv(x).chunk(3, -1)",
           "    q.clamp_(-1, 1)", "    stats = (q + k + v).mean()", "return self.qkv(x) * stats"),
    # iterating a list of module outputs gives tensors, not views
    _block("outs = [self.qkv(x), self.qkv(x)]", "for o in outs:", "    o[0] = 0",
           "return outs[0] + outs[1]"),
    # iterating a tensor without a graph
    _block("rows = x[:, 0, :]", "for r in rows:", "    r.sub_(1)", "return self.qkv(rows)"),
]

BAD = [
    (_block("q, k, v = self.qkv(x).split(4, dim=-1)", "q *= 0.5", "return q + k + v"), 9),
    (_block("h = self.norm(self.qkv(x))", "hv = h.view(2, 3, 3, 4).permute(0, 2, 1, 3)",
            "q, k, v = torch.split(hv, [1, 1, 1], 1)", "q.masked_fill_(q > 0, 0.0)",
            "return q + k + v"), 11),
    (_block("parts = self.qkv(x).chunk(3, -1)", "parts[0].clamp_(-1, 1)",
            "return parts[1] + parts[2]"), 9),
    (_block("out = self.qkv(x)", "a, b = out.unbind(0)", "a.t()[0] = 1", "return a + b"), 10),
    (_block("rows = self.qkv(x)[:, -1, :]", "for r, m in zip(rows, [1.0, 2.0]):",
            "    r.sub_(m).div_(2)", "return rows"), 10),
]


@pytest.mark.parametrize("i", range(len(GOOD)))
def test_look_alike_is_silent_and_runs(i: int) -> None:
    shape = Shape(GOOD[i], "GT608")
    assert _found(shape) == []
    _run(shape)


@pytest.mark.parametrize("i", range(len(BAD)))
def test_buggy_twin_is_reported_and_raises(i: int) -> None:
    src, line = BAD[i]
    shape = Shape(src, "GT608", line, MULTI)
    assert _found(shape) == [(line, "GT608")]
    _run(shape)


def test_unknown_parameter_is_not_followed() -> None:
    """A function's parameter may or may not carry a graph: not reported (Known limits),
    although it raises when the caller passes a tensor that requires grad."""
    src = """
def normalize(t):
    for row, m in zip(t, [0.5, 0.5]):
        row.sub_(m)
    return t

normalize(torch.randn(2, 3))
"""
    assert _found(Shape(src, "GT608")) == []
    _run(Shape(src, "GT608"))


@pytest.mark.parametrize("loop, rows", [
    ("for row in logits: pass", True),
    ("for row in self.head(h)[:, -1]: pass", True),
    ("for row in h.float(): pass", True),
    ("for a, b in zip(t, u): pass", True),
    ("for i in range(n): pass", False),
    ("for blk in self.blocks: pass", False),
    ("for i, x in enumerate(t): pass", False),
    ("for a, b in zip(range(3), self.blocks): pass", False),
    ("for k, v in d.items(): pass", False),
])
def test_loops_that_may_iterate_rows(loop: str, rows: bool) -> None:
    """NOTE [split gate]: only a loop of these shapes can be one ``MultiViews._iterated``
    finds; a function with no other loop and no split word is not read for GT608."""
    import ast

    from gradtrace.lint.analysis.multi_views import may_iterate_rows
    assert may_iterate_rows(ast.parse(loop).body[0]) is rows
