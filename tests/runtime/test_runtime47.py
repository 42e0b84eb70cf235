"""runtime47 on real torch, one process, a few steps, tiny models.

- NOTE [difference with its straight-through copy] (GT130 at run time): a residual quantizer
  whose layer returns the straight-through output ``x + (q - x).detach()`` behind a permute
  (and its inverse), and a caller that subtracts it from the residual it gave the layer: the
  difference has exactly zero gradient, named at the subtraction. Silent: the detached output
  subtracted (the fix); a difference with ``x + noise`` (a constant that is not a detached
  value); a straight-through copy transposed once, whose difference with ``x`` keeps a gradient.
- NOTE [graph values rewritten through .data] (GT864): a generator's output normalised per
  channel through ``.data`` in a helper, then fed to the loss: named at the write. Silent: the
  same normalisation out of place; ``masked_fill_`` of ``-inf`` through ``.data`` before a
  softmax; a perturbation leaf projected through ``.data``; the rewrite of a tensor no
  backward() runs through (a program that never trains).
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


GEN = """
import torch
import torch.nn as nn
torch.manual_seed(0)
MEAN, STD = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]
gen = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.Tanh())
clf = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                    nn.Linear(4, 5)).requires_grad_(False)
opt = torch.optim.Adam(gen.parameters(), lr=1e-3)


def shape_output(out):
    out = (out + 1) * 0.5
    for c in range(3):
        WRITE  # <- write
    return out


for step in range(TRAIN):
    out = shape_output(gen(torch.rand(2, 2, 8, 8)))
    scores = clf(torch.randn(2, 3, 8, 8) + out)
    scores.data.masked_fill_(scores.data < -10.0, -float("inf"))
    loss = -nn.functional.cross_entropy(scores.softmax(-1).log(), torch.randint(0, 5, (2,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    print(shape_output(gen(torch.rand(1, 2, 8, 8))).mean())
"""
_NORM = "out.data[:, c] = (out.data[:, c] - MEAN[c]) / STD[c]"


def test_graph_output_normalised_through_data_named_at_the_write(run_script):
    src = GEN.replace("WRITE", _NORM).replace("TRAIN", "3")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _codes(res)[:1] == [("GT864", marked_line(src, "# <- write"))], res.findings


def test_scaled_in_place_through_data_named_at_the_write(run_script):
    src = GEN.replace("WRITE", "out.data[:, c].mul_(1.0 / STD[c])").replace("TRAIN", "3")
    res = run_script(src)
    assert res.code == 0, res.err
    assert ("GT864", marked_line(src, "# <- write")) in _codes(res), res.findings


def test_normalised_out_of_place_is_silent(run_script):
    src = GEN.replace("    for c in range(3):\n        WRITE  # <- write\n",
                      "    out = (out - torch.tensor(MEAN).view(1, 3, 1, 1)) / "
                      "torch.tensor(STD).view(1, 3, 1, 1)\n").replace("TRAIN", "3")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT864"], res.findings


def test_constant_fill_through_data_is_silent(run_script):
    src = GEN.replace("WRITE", "out.data[:, c].masked_fill_(out.data[:, c] > 0.99, 1.0)") \
        .replace("TRAIN", "3")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT864"], res.findings


def test_never_trained_rewrite_is_silent(run_script):
    src = GEN.replace("WRITE", _NORM).replace("TRAIN", "0").replace(
        "with torch.no_grad():\n    print(", "if True:\n    print(")
    res = run_script(src)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT864"], res.findings


PERTURB = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 3))
x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
delta = torch.zeros(4, 6, requires_grad=True)
for it in range(3):
    loss = nn.functional.cross_entropy(model(x + delta), y)
    loss.backward()
    delta.data[:] = (delta.data + 0.1 * delta.grad.sign()).clamp(-0.3, 0.3)
    delta.grad.zero_()
"""


def test_leaf_perturbation_projected_through_data_is_silent(run_script):
    res = run_script(PERTURB)
    assert res.code == 0, res.err
    assert not [f for f in res.findings if f["code"] == "GT864"], res.findings
