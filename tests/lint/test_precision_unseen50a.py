"""Shapes from the projects of docs/triage/unseen50a.md (session 50), each in another
spelling than the project's and next to a buggy twin that is still reported; the torch ones
run on real torch."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

EXTRACT = '''
def extract(student, victim, generator, opt, steps):
    call_s = {bound}.__call__
    for _ in range(steps):
        fake = generator(torch.randn(4, 3)).detach()
        with torch.no_grad():
            t_out = victim(fake)
{student_line}
        loss = F.l1_loss(s_out, t_out)
        opt.zero_grad()
        loss.backward()
        opt.step()
student, victim, gen = nn.Linear(3, 2), nn.Linear(3, 2), nn.Linear(3, 3)
before = student.weight.detach().clone()
extract(student, victim, gen, torch.optim.SGD(student.parameters(), lr=0.1), 2)
'''

PRUNE = '''
layer = nn.Conv2d(2, 4, 3)
idx = torch.tensor([0, 2])
layer.requires_grad_(False)
{between}
layer.requires_grad_(True)
opt = torch.optim.SGD(layer.parameters(), lr=0.1)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # JACKPURCELL/Model-Extraction-Attacks-Revisited (data-free extraction): the student's
    # call is kept as `forward_fn = module.__call__` and the student's loss is
    # `student_loss(forward_fn(fake), t_logit)` with `fake` detached and `t_logit` from the
    # victim under no_grad; GT201 read `forward_fn(fake)` as a plain function of a detached
    # input. Twin: the student's call made under the same no_grad (reported; raises).
    "bound-call-of-module": (
        Shape(EXTRACT.format(bound="student", student_line="        s_out = call_s(fake)"),
              "GT201", holds="not torch.equal(before, student.weight)"),
        Shape(EXTRACT.format(bound="student", student_line="            s_out = call_s(fake)"),
              "GT201", line=5, raises=(RuntimeError, "does not require grad"))),
    # Ben-Schneider-code/Universal-Backdoor-Attacks (fine-pruning defence): the layer is
    # frozen only so that its dormant filters can be zeroed in place (an in-place write into
    # a leaf that requires grad raises), then unfrozen for the fine-tuning; GT432 said the
    # unfreeze undoes the freeze. Twin: the write goes to another tensor, the freeze does
    # nothing (reported at the unfreeze).
    "freeze-for-in-place-edit": (
        Shape(PRUNE.format(between="layer.weight[idx] = layer.weight[idx].data.mul(0)"),
              "GT432", holds="layer.weight.requires_grad"
                             " and float(layer.weight.detach()[idx].abs().sum()) == 0"),
        Shape(PRUNE.format(between="mask = torch.ones(4)\nmask[idx] = 0"), "GT432", line=6,
              holds="layer.weight.requires_grad")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


def test_in_place_edit_needs_the_freeze() -> None:
    """Why the freeze is there: the same write on a leaf that requires grad raises."""
    layer = torch.nn.Conv2d(2, 4, 3)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        layer.weight[torch.tensor([0, 2])] = layer.weight[torch.tensor([0, 2])].data.mul(0)


# KacemKhaled/model-stealing: the black-box victim modules (kept for inference: queried,
# never fitted, no `configure_optimizers`) spell their `training_step` as `return None`;
# GT530 said the model never trains. Twin: a step that computes its loss, logs it and
# returns None (reported at the return).
VICTIM = '''
import torch.nn.functional as F
import pytorch_lightning as pl


class Victim(pl.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return F.softmax(self.net(x), dim=1)

    def training_step(self, batch, batch_idx):
{body}
'''


@pytest.mark.parametrize("body,line", [
    ("        return None", None),
    ("        return", None),
    ("        x, y = batch\n        loss = F.cross_entropy(self.net(x), y)\n"
     "        self.log('loss', loss)\n        return None", 18),
], ids=["return-none", "bare-return", "twin-loss-dropped"])
def test_step_declining_to_train(body: str, line: int | None) -> None:
    src = textwrap.dedent(VICTIM).format(body=body)
    got = [(f.line, f.code) for f in check_source(src, "t.py") if f.code == "GT530"]
    assert got == ([] if line is None else [(line, "GT530")])
