"""runtime47 on real torch, one process, a few steps, tiny models.

- NOTE [difference with its straight-through copy] (GT130 at run time): a residual quantizer
  whose layer returns the straight-through output ``x + (q - x).detach()`` behind a permute
  (and its inverse), and a caller that subtracts it from the residual it gave the layer: the
  difference has exactly zero gradient, named at the subtraction. Silent: the detached output
  subtracted (the fix); a difference with ``x + noise`` (a constant that is not a detached
  value); a straight-through copy transposed once, whose difference with ``x`` keeps a gradient.
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

RVQ = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)


class Stage(nn.Module):
    def __init__(self, dim, size):
        super().__init__()
        self.register_buffer("book", torch.randn(size, dim))

    def forward(self, h):
        h = h.permute(0, 2, 1)
        idx = torch.cdist(h.reshape(-1, h.shape[-1]), self.book).argmin(-1)
        code = F.embedding(idx, self.book).view_as(h)
        out = h + (code - h).detach()
        commit = F.mse_loss(code, h)
        return out.permute(0, 2, 1), commit


enc = nn.Conv1d(2, 4, 3, padding=1)
dec = nn.Conv1d(4, 2, 3, padding=1)
stages = nn.ModuleList(Stage(4, 8) for _ in range(3))
opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)


def quantize(z):
    left, total, losses = z, 0.0, []
    for stage in stages:
        got, commit = stage(left)
        left = LEFT  # <- residual
        total = total + got
        losses.append(commit)
    return total, sum(losses)


for step in range(3):
    wav = torch.randn(5, 2, 12)
    z = enc(wav)
    q, commit = quantize(z)
    loss = F.mse_loss(dec(q), wav) + commit
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _codes(res: object) -> list[tuple[str, int]]:
    return [(f["code"], f["line"]) for f in res.findings]  # type: ignore[attr-defined]


def test_residual_minus_permuted_straight_through_named_at_the_subtraction(run_script):
    src = RVQ.replace("LEFT", "left - got")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT130", marked_line(src, "# <- residual"))], res.findings


def test_residual_minus_detached_output_is_silent(run_script):
    src = RVQ.replace("LEFT", "left - got.detach()")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT130"], res.findings


def test_difference_with_added_noise_is_silent(run_script):
    src = RVQ.replace("out = h + (code - h).detach()", "out = h + torch.randn_like(h)").replace(
        "LEFT", "left - got")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT130"], res.findings


def test_straight_through_transposed_once_keeps_a_gradient(run_script):
    # square residuals: the copy comes back transposed, `left - got` is `x - x.T` for the
    # gradient (not zero)
    src = RVQ.replace("out.permute(0, 2, 1), commit", "out, commit").replace(
        "torch.randn(5, 2, 12)", "torch.randn(5, 2, 4)").replace("LEFT", "left - got")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT130"], res.findings
