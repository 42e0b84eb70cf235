"""Session 53 (recall53): what a name is, read across calls and files.

Each shape has a buggy twin (reported, on the line asserted) and a silent look-alike, written in
styles other than the probes and real-world cases they come from. Multi-file shapes are written
into ``tmp_path`` and checked in-process (``check_paths``).
"""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_paths, check_source
from gradtrace.lint.config import Settings


def _project(tmp_path, files: dict[str, str]) -> list[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    root = tmp_path / "proj"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    found = check_paths([str(root)], Settings()).findings
    return sorted((f.path.rpartition("/")[2], f.line, f.code) for f in found)


# NOTE [kinds by the callers]: `fit_epoch(net, batches, optim, sched)` in `loops.py` is
# handed an optimizer and a scheduler by `main.py`; the loop clears and backpropagates but
# steps only the scheduler. One reading: the parameter kinds come from the other file's call.
LOOPS = """
import torch.nn.functional as F


def fit_epoch(net, batches, optim, sched):
    for inputs, labels in batches:
        optim.zero_grad()
        F.cross_entropy(net(inputs), labels).backward()
        {update}
"""
MAIN = """
import torch
from loops import fit_epoch

net = torch.nn.Linear(6, 2)
optim = torch.optim.AdamW(net.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.ExponentialLR(optim, gamma=0.9)
data = [(torch.randn(5, 6), torch.randint(0, 2, (5,)))]
for epoch in range(3):
    fit_epoch(net, data, optim, sched)
{after}
"""

HANDED = {
    # twin: the scheduler is stepped where the optimizer's step belongs (reported there)
    "scheduler-in-place": ("sched.step()", "", [("loops.py", 9, "GT544")]),
    # look-alike: the loop steps both
    "both-stepped": ("optim.step(); sched.step()", "", []),
    # look-alike: the caller applies the gradients itself after the helper fills them
    # (a caller of another file that steps what it hands in: NOTE [kinds by the callers])
    "caller-steps": ("sched.step()", "    optim.step()", []),
}


@pytest.mark.parametrize("name", sorted(HANDED))
def test_handed_optimizer_across_files(tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    update, after, expected = HANDED[name]
    found = _project(tmp_path, {"loops.py": LOOPS.format(update=update),
                                "main.py": MAIN.format(after=after)})
    assert [f for f in found if f[2] == "GT544"] == expected


# A freeze by a plain attribute of a submodule of a model whose class is in a third file:
# `net.backbone` is a module (the class's `__init__` in `nets.py` makes it one), so
# `net.backbone.requires_grad = False` freezes nothing (GT407). Look-alikes: the same write on
# a parameter of that class (a real flag), and the method `requires_grad_(False)`.
NETS = """
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab=50):
        super().__init__()
        self.backbone = nn.Sequential(nn.Embedding(vocab, 8), nn.GRU(8, 8, batch_first=True))
        self.temperature = nn.Parameter(torch.ones(()))
        self.out = nn.Linear(8, 4)

    def forward(self, tokens):
        h, _ = self.backbone(tokens)
        return self.out(h) / self.temperature
"""
FREEZE = """
import torch


def stage_one(tagger):
    {freeze}
    return torch.optim.SGD([p for p in tagger.parameters() if p.requires_grad], lr=0.1)
"""
RUN = """
import nets
import freeze

tagger = nets.Tagger()
opt = freeze.stage_one(tagger)
"""


@pytest.mark.parametrize("write, expected", [
    ("tagger.backbone.requires_grad = False", [("freeze.py", 6, "GT407")]),
    ("tagger.temperature.requires_grad = False", []),
    ("tagger.backbone.requires_grad_(False)", []),
])
def test_submodule_freeze_across_files(tmp_path, write: str, expected: list) -> None:  # type: ignore[no-untyped-def]
    found = _project(tmp_path, {"nets.py": NETS, "freeze.py": FREEZE.format(freeze=write),
                                "run.py": RUN})
    assert [f for f in found if f[2] == "GT407"] == expected


# A helper of another file that cuts the loss handed to it: named at the caller's call (the
# line a user edits), the helper's line related. Look-alike: the helper keeps the graph.
@pytest.mark.parametrize("body, expected", [
    ("return torch.tensor(float(value.sum()))", [("step.py", 8, "GT102")]),
    ("return value.sum()", []),
])
def test_helper_file_cuts_the_loss(tmp_path, body: str, expected: list) -> None:  # type: ignore[no-untyped-def]
    found = _project(tmp_path, {
        "reduce.py": f"import torch\n\n\ndef total(value):\n    {body}\n",
        "step.py": """
            import torch
            from reduce import total

            def step(model, opt, xb):
                opt.zero_grad()
                per_item = (model(xb) - 1.0).abs()
                objective = total(per_item)
                objective.backward()
                opt.step()
            """})
    assert [f for f in found if f[2] in ("GT102", "GT103", "GT104")] == expected


# GT507 read `acc.backward(loss)` as the backward of a tensor named `acc` (a value carried
# across passes) when the object came from `Accelerator()`: what `acc` is comes from its
# constructor. Twin: a tensor with its graph computed once before the loop, named `acc` too.
ACC = """
import torch
from accelerate import Accelerator

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{bind}
for _ in range(3):
    loss = {loss}
    opt.zero_grad()
    {backward}
    opt.step()
"""


@pytest.mark.parametrize("bind, loss, backward, expected", [
    ("acc = Accelerator()\nmodel, opt = acc.prepare(model, opt)",
     "model(torch.randn(8, 4)).pow(2).mean()", "acc.backward(loss)", []),
    ("acc = model(torch.ones(1, 4))", "(model(torch.randn(8, 4)) * acc).mean()",
     "loss.backward()", [(7, "GT507")]),
])
def test_backward_owner_from_its_constructor(bind: str, loss: str, backward: str,
                                             expected: list) -> None:
    src = ACC.format(bind=bind, loss=loss, backward=backward)
    found = check_source(src, select=["GT507"])
    assert [(f.line, f.code) for f in found] == expected


# GT602/GT603 through a local instance of a module class of the file: the constructor's line
# names no op (`scorer = Scorer()`), the class's `forward` returns a saved output; the function
# runs a backward after the write, so its name (`train_scorer`: "score") does not make it inference.
CLASS_SIG = """
import torch
from torch import nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 1)

    def forward(self, feats):
        return {ret}


def train_scorer(feats, target):
    scorer = Scorer()
    opt = torch.optim.SGD(scorer.parameters(), lr=0.01)
    prob = scorer(feats)
    {write}
    loss = torch.nn.functional.binary_cross_entropy(prob, target)
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("ret, write, expected", [
    ("torch.sigmoid(self.proj(feats))", "prob.clamp_(1e-4, 1 - 1e-4)", [(19, "GT602")]),
    ("torch.sigmoid(self.proj(feats))", "prob = prob.clamp(1e-4, 1 - 1e-4)", []),
    ("torch.sigmoid(self.proj(feats)) * 0.5", "prob.clamp_(1e-4, 1 - 1e-4)", []),
])
def test_saved_output_of_a_local_instance(ret: str, write: str, expected: list) -> None:
    src = CLASS_SIG.format(ret=ret, write=write)
    found = check_source(src, select=["GT602"])
    assert [(f.line, f.code) for f in found] == expected


RELU_BLOCK = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Unit(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return F.relu(self.lin(x))


unit = Unit(6)
sgd = torch.optim.SGD(unit.parameters(), lr=0.1)
x = torch.randn(3, 6)
{grad}
    y = unit(x)
    {add}
    y.mean().backward()
"""


@pytest.mark.parametrize("grad, add, expected", [
    ("if True:", "y += x", [(21, "GT603")]),
    ("if True:", "y = y + x", []),
    ("with torch.no_grad():", "y += x", []),
])
def test_relu_output_of_a_local_instance(grad: str, add: str, expected: list) -> None:
    src = RELU_BLOCK.format(grad=grad, add=add)
    found = check_source(src, select=["GT603"])
    assert [(f.line, f.code) for f in found] == expected
