"""`detach_()` of a tensor an op saved for backward: torch raises in backward() without a line
("Trying to use a saved tensor that has been detached in-place"); `gradtrace run` names the
detach_() call (the first on a graph tensor). Real torch; the out-of-place `.detach()` and a
`detach_()` after backward() (truncated BPTT) stay silent."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")

HEAD = """
import torch
import torch.nn as nn
"""

BUG = """
def memory_step(cell, x, mem, stats):
    stats.detach_()
    mem = torch.tanh(cell(x) + mem)
    loss = (mem * mem).mean()
    mem.detach_()  # C
    return loss, mem

cell = nn.Linear(4, 4)
mem, stats = torch.zeros(2, 4), torch.ones(4)
for _ in range(2):
    loss, mem = memory_step(cell, torch.randn(2, 4), mem, stats)
    loss.backward()
"""

LOOKALIKES = {
    "out_of_place_detach": """
def memory_step(cell, x, mem):
    mem = torch.tanh(cell(x) + mem)
    loss = (mem * mem).mean()
    return loss, mem.detach()

cell = nn.Linear(4, 4)
mem = torch.zeros(2, 4)
for _ in range(2):
    loss, mem = memory_step(cell, torch.randn(2, 4), mem)
    loss.backward()
""",
    "detach_in_place_after_backward": """
rnn = nn.GRU(3, 5)
h = torch.zeros(1, 2, 5)
for _ in range(3):
    out, h = rnn(torch.randn(4, 2, 3), h)
    out.pow(2).mean().backward()
    h.detach_()
""",
}


def test_detach_in_place_named(run_script):
    src = (HEAD + BUG).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 1, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == ("GT602", line), res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_detach_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
