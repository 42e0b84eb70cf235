"""runtime51 on real torch, one process, a few steps, tiny models.

- NOTE [difference of a tensor with itself] (GT902): ``cur = saved[:n]`` with ``n`` the whole
  length, then ``(cur - saved) ** 2`` in a penalty added to the loss: named at the statement
  that bound the view; ``p - anchor`` with ``anchor`` kept as the parameter itself: named at the
  difference. Look-alikes: the slice of the current parameter (the fix), a shorter slice, a
  shifted slice, an anchor saved with ``.detach().clone()``, ``x - x.detach()``.
- NOTE [loss on the straight-through output] (GT107's line): a VQ codebook loss
  ``F.mse_loss(z_q, z_e.detach())`` on the straight-through output: the codebook's
  never-graded finding names that loss, not the ``.detach()``. Look-alikes: the loss on the
  lookup (the fix), the straight-through output against data while the codebook has its own
  loss; a codebook starved by another cut keeps the cut's line.
- NOTE [crash in related] for a specific runtime diagnosis: the run's in-place-on-a-leaf error
  (GT302) at a ReLU module applied to its own weight, made in place by a pass that sets
  ``m.inplace = True``: the static GT133 (its related entry "raises here" on the crash line)
  leads. DDP's "marked ready twice" (GT882) explained by the static GT134 (a method outside
  ``forward`` under ``find_unused_parameters=True``): GT134 leads. Look-alikes: the ReLU on a
  clone, the loss computed inside ``forward`` (both run clean).
"""
from __future__ import annotations

import pytest

from tests.runtime.rt_helpers import marked_line

torch = pytest.importorskip("torch")

EWC = """
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Linear(4, 2)
saved = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def penalty():
    total = torch.zeros(())
    for cur, old in zip(model.parameters(), saved):
        n = old.shape[0]
        PICK
        total = total + DIFF
    return total


for step in range(2):
    loss = model(torch.randn(8, 4)).pow(2).mean() + penalty()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _lines(res: object, code: str) -> list[int]:
    return [f["line"] for f in res.findings if f["code"] == code]  # type: ignore[attr-defined]


def test_view_of_the_whole_saved_tensor_subtracted_from_it_is_named(run_script):
    src = EWC.replace("PICK", "cur = old[:n]  # <- cause").replace(
        "DIFF", "((cur - old) ** 2).sum()")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT902") == [marked_line(src)], res.findings
    assert res.findings[0]["code"] == "GT902", res.findings


def test_anchor_kept_as_the_parameter_itself_is_named_at_the_difference(run_script):
    src = EWC.replace("saved = [p.detach().clone() for p in model.parameters()]",
                      "saved = [p for p in model.parameters()]").replace(
        "PICK", "pass").replace("total = total + DIFF",
                                "total = total + ((cur - old) ** 2).sum()  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    assert _lines(res, "GT902") == [marked_line(src)], res.findings


@pytest.mark.parametrize("pick,diff", [
    ("cur = cur[:n]", "((cur - old) ** 2).sum()"),  # the fix: the current parameter
    ("cur = old[:n - 1]", "((cur - old[1:]) ** 2).sum()"),  # a shorter, shifted slice
    ("cur = old[:n]", "((cur[1:] - old[:-1]) ** 2).sum()"),  # shifted views of one base
    ("pass", "((cur - cur.detach()) ** 2).sum()"),  # the zero-valued trick on purpose
    # NOTE [a line that also subtracts apart]: one memory on the first pass only
    ("pass", "sum(((g - old) ** 2).sum() for g in (old, old + 1))"),
])
def test_difference_of_distinct_elements_is_not_reported(run_script, pick, diff):
    res = run_script(EWC.replace("PICK", pick).replace("DIFF", diff))
    assert res.code == 0, res.err
    assert _lines(res, "GT902") == [], res.findings


VQ = """
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
enc, dec, book = nn.Linear(6, 4), nn.Linear(4, 6), nn.Embedding(5, 4)
opt = torch.optim.SGD([*enc.parameters(), *dec.parameters(), *book.parameters()], lr=0.1)
for step in range(2):
    x = torch.randn(8, 6)
    z_e = enc(x)
    z = book(torch.cdist(z_e, book.weight).argmin(-1))
    z_q = z_e + (z - z_e).detach()  # <- cut
    recon = F.mse_loss(dec(z_q), x)
    LOSS
    opt.zero_grad()
    (recon + book_loss + 0.25 * F.mse_loss(z_e, z.detach())).backward()
    opt.step()
"""


def test_codebook_loss_on_the_straight_through_output_is_named(run_script):
    src = VQ.replace("LOSS", "book_loss = F.mse_loss(z_q, z_e.detach())  # <- cause")
    res = run_script(src)
    assert res.code == 0, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT107", marked_line(src)), res.findings


@pytest.mark.parametrize("loss", [
    "book_loss = F.mse_loss(z, z_e.detach())",  # the fix: the lookup
    "book_loss = F.mse_loss(z_q, x[:, :4]) + F.mse_loss(z, z_e.detach())",  # data target
])
def test_loss_that_trains_the_codebook_is_not_reported(run_script, loss):
    res = run_script(VQ.replace("LOSS", loss))
    assert res.code == 0, res.err
    assert res.findings == [], res.findings


def test_codebook_starved_by_another_cut_keeps_the_cut_line(run_script):
    src = VQ.replace("z = book(", "z = book.weight.detach()[").replace(
        "argmin(-1))", "argmin(-1)]  # <- cause").replace(
        "LOSS", "book_loss = F.mse_loss(z_q, z_e.detach())")
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings[0]["line"] == marked_line(src), res.findings


RELU = """
import torch
import torch.nn as nn


class Fuse(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))
        self.weight_relu = nn.ReLU()
        self.lin = nn.Linear(3, 3)

    def forward(self, a, b):
        w = self.weight_relu(WEIGHT)
        return self.lin(w[0] * a + w[1] * b)


def initialize_weights(model):
    for m in model.modules():
        if type(m) in [nn.ReLU, nn.LeakyReLU]:
            m.inplace = True  # <- cause


model = Fuse()
initialize_weights(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(4, 3), torch.randn(4, 3)).pow(2).mean()
loss.backward()
opt.step()
"""


def test_activation_made_in_place_on_a_weight_leads_with_the_static_cause(run_script):
    src = RELU.replace("WEIGHT", "self.weight")
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT133", marked_line(src)), res.findings


def test_activation_in_place_on_a_clone_runs_clean(run_script):
    res = run_script(RELU.replace("WEIGHT", "self.weight.clone()"))
    assert res.code == 0, res.err
    assert [f["code"] for f in res.findings if f["code"] in ("GT133", "GT302")] == [], \
        res.findings


DDP = """
import os, tempfile
import torch
import torch.distributed as dist
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 3)
        self.crf = nn.Linear(3, 3)

    def forward(self, x):
        return BODY

    def get_loss(self, emissions):
        return (emissions @ self.crf.weight).pow(2).mean()  # the layer's weight, not its call


def wrap(model):
    return nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)  # <- cause


def train(model):
    ddp = wrap(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(2):
        out = ddp(torch.randn(5, 4))
        loss = LOSS
        opt.zero_grad()
        loss.backward()
        opt.step()


if not dist.is_initialized():
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tempfile.mkdtemp(), "s"),
                            rank=0, world_size=1)
try:
    train(Tagger())
finally:
    dist.destroy_process_group()
"""


def test_ddp_ready_twice_leads_with_the_method_outside_forward(run_script):
    src = DDP.replace("BODY", "self.body(x)").replace("LOSS", "ddp.module.get_loss(out)")
    res = run_script(src)
    assert res.code != 0
    first = res.findings[0]
    assert (first["code"], first["line"]) == ("GT134", marked_line(src)), res.findings


def test_ddp_loss_inside_forward_runs_clean(run_script):
    res = run_script(DDP.replace("BODY", "self.crf(self.body(x))").replace(
        "LOSS", "out.pow(2).mean()"))
    assert res.code == 0, res.err
    assert [f["code"] for f in res.findings if f["code"] in ("GT134", "GT882")] == [], \
        res.findings
