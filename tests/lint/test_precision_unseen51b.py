"""Shapes from the projects of docs/triage/unseen51b.md (session 51), each in another
spelling than the project's and next to a buggy twin that is still reported; the torch ones
run on real torch."""
from __future__ import annotations

import runpy
import sys

import pytest

from imports_as_found import imports_as_found
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
'''

HANDED = '''
class Coder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(2, 3, 1), {layer})
    def forward(self, x):
        return self.body(x)
class Guided(nn.Module):
    def __init__(self, coder, head):
        super().__init__()
        self.coder = coder
        self.head = head
        self.coder.eval()
        for p in self.coder.parameters():
            p.requires_grad = False
    def forward(self, x):
        with torch.no_grad():
            z = self.coder(x)
        return self.head(z)
coder = Coder()
model = Guided(coder, nn.Conv1d(3, 1, 1)).to("cpu")
opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
for epoch in range(2):
    model.train()
    opt.zero_grad()
    model(torch.randn(4, 2, 5)).sum().backward()
    opt.step()
xx = torch.randn(2, 2, 5)
'''

FLUSH = '''
def train(model, loader, optimizer, accum, epochs):
    for epoch in range(epochs):
        for i, (x, y) in enumerate(loader):
            loss = F.mse_loss(model(x), y) / accum
            loss.backward()
            if i % accum == 0 and i != 0:
                optimizer.step()
                optimizer.zero_grad()
{flush}
model = nn.Linear(3, 1)
data = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(5)]
train(model, data, torch.optim.SGD(model.parameters(), lr=0.1), 2, 2)
'''

MATCH = '''
class Prompted(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(3, 3)
        self.prompt = nn.Linear(3, 3)
    def set_mode(self, mode):
        match mode:
            case "train":
{train}
            case "eval":
                self.requires_grad_(False)
        return self
m = Prompted().set_mode("train")
'''

DETECT = '''
class Det(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Linear(3, 2)
        self.box = nn.Linear(3, 4)
    def forward(self, x):
        return {{"cls": self.cls(x), "box": self.box(x)}}
def predict(model, x):
    with torch.inference_mode():
        preds = model(x)
{after}
    return preds
'''

ATTEND = '''
class Attend(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=1)
    def forward(self, query, context):
        scores = torch.bmm(query, context.transpose(1, 2))
        weights = self.softmax(scores)
        return torch.bmm(weights, context)
class Slots(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attend()
    def forward(self, x, intent):
{context}
        return self.attention(x, intent)
out = Slots()(torch.randn(2, 5, 4), torch.randn(2, {size}))
'''

PROJECTED = '''
import numpy as np
class Mix(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.d = d
        self.proj = nn.Linear(n, d, bias=False)
    def forward(self, queries, values):
        values = self.proj(values)
        scores = torch.bmm(queries, values.transpose(1, 2).contiguous()) / np.sqrt(self.d)
        weights = torch.softmax(scores, dim=1)
        return torch.bmm(weights, values)
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = Mix(3, 4)
    def forward(self, x, logits):
        probs = torch.softmax(logits, dim=1)
{context}
        return self.mix(x, probs)
out = Head()(torch.randn(2, 5, 4), torch.randn(2, {shape}))
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # zjxyoyo/LDGuid (change detection with a frozen autoencoder's latent): the wrapper's
    # `__init__` takes the pretrained autoencoder as a parameter, puts it in eval mode and
    # freezes it; `model.train()` each epoch undoes the eval, but the autoencoder's class (of
    # another file there; of this file here) has no Dropout or BatchNorm: nothing changes.
    # GT443 took any handed part as mode-dependent. Twin: the part's class holds a
    # BatchNorm (reported; its running statistics move).
    "handed-mode-free-part": (
        Shape(HANDED.format(layer="nn.ReLU()"), "GT443",
              holds="torch.equal(coder.train()(xx), coder.eval()(xx))"),
        Shape(HANDED.format(layer="nn.BatchNorm1d(3)"), "GT443", line=23,
              holds="int(coder.body[1].num_batches_tracked) == 2")),
    # LinWeizheDragon/KAGE-GPT2 (dialogue state tracking): the loss divided by the
    # accumulation count, the step under `if i % N == 0` in the batch loop, and one more step
    # after the batch loop, at the epoch level, applying what the last passes left; GT519 read
    # that flush as a step on every pass. Twin: the extra step inside the batch loop, outside
    # the branch (reported).
    "flush-after-inner-loop": (
        Shape(FLUSH.format(flush="        optimizer.step()\n        optimizer.zero_grad()"),
              "GT519"),
        Shape(FLUSH.format(flush="            optimizer.step()\n            optimizer.zero_grad()"),
              "GT519", line=9)),
    # HAL-42/FMA-WSSS (CLIP-based weakly supervised segmentation): `set_mode` freezes all and
    # unfreezes the prompt learner under `case 'train'`, freezes all under `case 'eval'`;
    # GT408 read the eval case's freeze as undoing the train case's unfreeze. Twin: the
    # freeze after the unfreeze in one case (reported).
    "freeze-in-another-match-case": (
        Shape(MATCH.format(train="                self.requires_grad_(False)\n"
                                 "                self.prompt.requires_grad_(True)"), "GT408",
              holds="m.prompt.weight.requires_grad and not m.backbone.weight.requires_grad"),
        Shape(MATCH.format(train="                self.prompt.requires_grad_(True)\n"
                                 "                self.requires_grad_(False)"), "GT408", line=10,
              holds="not m.prompt.weight.requires_grad")),
    # iosonopersia/Document-Layout-Analysis: the detector returns a dict of tensors made under
    # inference_mode; `predictions[S] = predictions[S].cpu()` over `predictions.keys()`
    # rebinds dict entries, nothing is written in place. Twin: an item write into the tensor
    # the model returned (reported; raises).
    "dict-entry-after-inference": (
        Shape(DETECT.format(after="    for k in preds.keys():\n        preds[k] = preds[k].cpu()")
              + "out = predict(Det(), torch.randn(2, 3))", "GT221",
              holds="out['box'].shape == (2, 4)"),
        Shape(DETECT.format(after="    preds[0] = 0") + "out = predict(nn.Linear(3, 2), "
              "torch.randn(2, 3))", "GT221", line=11,
              raises=(RuntimeError, "Inplace update to inference tensor"))),
    # HKAB/bkai-naver (JointIDSF's intent-slot attention): the one intent vector is passed as
    # `unsqueeze(intent, 1)`, so the scores' last axis has size 1 and the product sums
    # nothing; the softmax over the positions (dim 1) is the only one that means anything
    # (over the last axis every weight would be 1.0). Twin: the context is a sequence
    # (reported at the softmax's constructor).
    "single-context-vector": (
        Shape(ATTEND.format(context="        intent = torch.unsqueeze(intent, 1)", size=4),
              "GT764", holds="out.shape == (2, 5, 4) and torch.equal(torch.softmax("
                             "torch.randn(2, 5, 1), dim=-1), torch.ones(2, 5, 1))"),
        Shape(ATTEND.format(context="        intent = intent.view(2, 3, 4)", size=12),
              "GT764", line=4, holds="out.shape == (2, 5, 4)")),
    # HKAB/bkai-naver (its own attention module): the intent probabilities, `softmax(logits,
    # dim=1).unsqueeze(1)`, projected by a Linear inside the module, the scores divided by
    # `np.sqrt(self.d)`: the same single context vector. Twin: the context is a sequence.
    "projected-single-context": (
        Shape(PROJECTED.format(context="        probs = probs.unsqueeze(1)", shape=3), "GT764",
              holds="out.shape == (2, 5, 4)"),
        Shape(PROJECTED.format(context="        probs = probs.view(2, 2, 3)", shape=6), "GT764",
              line=10, holds="out.shape == (2, 5, 4)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("which", [0, 1], ids=["look-alike", "twin"])
def test_shape(name: str, which: int) -> None:
    judge(PRELUDE, SHAPES[name][which])


CODER = '''
import torch.nn as nn


class Coder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(2, 3, 1), LAYER)

    def forward(self, x):
        return self.body(x)
'''

TRAIN = '''
import torch
import torch.nn as nn
from models.coder import Coder


class Guided(nn.Module):
    def __init__(self, coder, head):
        super().__init__()
        self.coder = coder
        self.head = head
        self.coder.eval()
        for p in self.coder.parameters():
            p.requires_grad = False

    def forward(self, x):
        with torch.no_grad():
            z = self.coder(x)
        return self.head(z)


coder = Coder()
model = Guided(coder, nn.Conv1d(3, 1, 1))
opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
for epoch in range(2):
    model.train()
    opt.zero_grad()
    model(torch.randn(4, 2, 5)).sum().backward()
    opt.step()
'''


def _lines(path, code: str) -> list[int]:  # type: ignore[no-untyped-def]
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    return [f.line for f in check_paths([str(path)], Settings()).findings if f.code == code]


def _project(tmp_path, files: dict[str, str]):  # type: ignore[no-untyped-def]
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp_path / "models" / "__init__.py").write_text("")
    return tmp_path / "train.py"


def _run(tmp_path, path) -> dict:  # type: ignore[no-untyped-def]
    with imports_as_found(tmp_path):  # `models` and its modules gone afterwards
        for m in [m for m in sys.modules if m == "models" or m.startswith("models.")]:
            del sys.modules[m]  # another file's package of that name: back afterwards
        return runpy.run_path(str(path))


@pytest.mark.parametrize("layer,lines", [("nn.ReLU()", []), ("nn.BatchNorm1d(3)", [26])],
                         ids=["look-alike", "twin"])
def test_handed_part_of_another_file(tmp_path, layer: str, lines: list[int]) -> None:
    """The handed part's class lives in another file of the project (the case seen)."""
    path = _project(tmp_path, {"models/coder.py": CODER.replace("LAYER", layer),
                               "train.py": TRAIN})
    assert _lines(path, "GT443") == lines
    env = _run(tmp_path, path)
    stats = [m for m in env["coder"].modules() if isinstance(m, torch.nn.BatchNorm1d)]
    assert all(int(m.num_batches_tracked) == 2 for m in stats) and len(stats) == len(lines)


ENV = '''
import torch
import torch.nn as nn


class Env(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 4)
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return self.net(x) * self.scale

    def loss(self, x, y):
        return ((self(x) - y) ** 2).mean()
'''

FIT = '''
import torch
from torch.optim.adam import Adam
from models.env import Env

model = Env()
optim = Adam(model.parameters(), lr=1e-2)
{before}
for step in range(3):
    optim.zero_grad()
    loss = {loss}
    loss.backward(retain_graph=True)
    optim.step()
'''


@pytest.mark.parametrize("before,loss,lines", [
    ("", "model.loss(torch.randn(8, 3), torch.randn(8, 4))", []),
    ("feats = model(torch.randn(8, 3))", "((feats - torch.randn(8, 4)) ** 2).mean()", [11]),
], ids=["look-alike", "twin"])
def test_model_of_another_file_built_before_the_loop(tmp_path, before: str, loss: str,
                                                     lines: list[int]) -> None:
    """Mr-Pepe/offline-model-based-rl's tests: `model = EnvironmentModel(...)` (a class of
    another file) before a loop that computes a fresh loss, backward with retain_graph and
    steps; GT601 read the module as a value whose graph every pass reuses. Twin: the model's
    output computed before the loop (reported; the second backward raises)."""
    path = _project(tmp_path, {"models/env.py": ENV, "train.py": FIT.format(
        before=before, loss=loss)})
    assert _lines(path, "GT601") == lines
    if lines:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            _run(tmp_path, path)
    else:
        _run(tmp_path, path)
