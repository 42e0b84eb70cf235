"""Shapes that fired wrongly on the projects of docs/triage/unseen25.md (session 24), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch (the Lightning pair on real Lightning)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # SpeechTokenizer (trainer/loss.py): `-log(sigmoid(cosine_similarity(a, b)))`: the cosine
    # lies in [-1, 1], the sigmoid in [0.27, 0.74], the log and its gradient stay finite
    # whatever the features' scale. Twin: a raw dot product of the same features: the sigmoid
    # rounds to 0 below -88 and the gradient is NaN
    "sigmoid-of-a-cosine-similarity": (Shape("""
        def agreement_loss(student, teacher):
            sim = F.cosine_similarity(student, teacher, dim=-1)
            return -torch.sigmoid(sim).log().mean()
        student = (torch.randn(16, 8) * 100).requires_grad_()
        teacher = torch.randn(16, 8) * 100
        agreement_loss(student, teacher).backward()
        """, "GT756", holds="bool(torch.isfinite(student.grad).all())"), Shape("""
        def agreement_loss(student, teacher):
            sim = (student * teacher).sum(-1)
            return -torch.sigmoid(sim).log().mean()
        student = (torch.randn(16, 8) * 100).requires_grad_()
        teacher = torch.randn(16, 8) * 100
        agreement_loss(student, teacher).backward()
        """, "GT756", line=3, holds="bool(torch.isnan(student.grad).any())")),
    # TabPFN (tests/test_get_gradients.py): `x = x.detach() - rate * x.grad` then
    # `x.requires_grad = True`: the detached value and `.grad` carry no history, the result is
    # a new leaf and the flag is accepted. Twin: `x - rate * x.grad` keeps `x`'s history: a
    # non-leaf, the flag raises
    "new-leaf-from-detached-value-and-its-grad": (Shape("""
        w = torch.randn(5)
        inputs = torch.randn(3, 5, requires_grad=True)
        for _ in range(3):
            (inputs @ w).pow(2).sum().backward()
            inputs = inputs.detach() - 0.1 * inputs.grad
            inputs.requires_grad = True
        """, "GT303", holds="inputs.is_leaf and inputs.requires_grad"), Shape("""
        w = torch.randn(5)
        inputs = torch.randn(3, 5, requires_grad=True)
        for _ in range(3):
            (inputs @ w).pow(2).sum().backward()
            inputs = inputs - 0.1 * inputs.grad
            inputs.requires_grad = True
        """, "GT303", line=6, raises=(RuntimeError, "leaf variables"))),
    # shap-e (models/nerf/model.py): `background = nn.Parameter(\\n torch.from_numpy(
    # np.array(background)) ...)`: the NumPy call reads the constructor's argument (a list),
    # the value is evaluated before the name is rebound. Twin: NumPy reads the name after
    # the statement, the Parameter itself
    "parameter-made-from-the-argument-it-replaces": (Shape("""
        class Backdrop(nn.Module):
            def __init__(self, colour=(255.0, 255.0, 255.0)):
                super().__init__()
                colour = nn.Parameter(
                    torch.from_numpy(np.array(colour, dtype=np.float32)) / 255.0)
                self.register_parameter("colour", colour)
        shade = Backdrop().colour
        """, "GT114", holds="shade.requires_grad and float(shade.sum()) == 3.0"), Shape("""
        class Backdrop(nn.Module):
            def __init__(self, colour=(255.0, 255.0, 255.0)):
                super().__init__()
                colour = nn.Parameter(
                    torch.from_numpy(np.array(colour, dtype=np.float32)) / 255.0)
                self.mean_colour = float(np.array(colour).mean())
                self.register_parameter("colour", colour)
        shade = Backdrop().colour
        """, "GT114", line=6, raises=(RuntimeError, "requires grad"))),
    # esm (inverse_folding/util.py): a scoring helper returns the per-token loss as NumPy
    # (`loss[0].cpu().detach().numpy()`): nothing comes back into torch, no caller can call
    # backward on it. Twin: the NumPy value is turned back into a tensor and returned as the
    # loss: backward raises
    "function-returns-numpy-scores": (Shape("""
        def sequence_loss(model, x, y):
            logits, _ = model(x), None
            loss = F.cross_entropy(logits, y, reduction="none")
            loss = loss[0].cpu().detach().numpy()
            return loss, y.numpy()
        per_token, labels = sequence_loss(nn.Linear(4, 3), torch.randn(6, 4),
                                          torch.randint(3, (6,)))
        """, "GT103", holds="per_token.shape == ()"), Shape("""
        def token_loss(model, x, y):
            nll = F.cross_entropy(model(x), y, reduction="none")
            nll = nll.detach().cpu().numpy()
            return torch.from_numpy(nll).mean()
        token_loss(nn.Linear(4, 3), torch.randn(6, 4), torch.randint(3, (6,))).backward()
        """, "GT103", line=3, raises=(RuntimeError, "does not require grad"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# PatchCore (train.py): a LightningModule whose `configure_optimizers` returns None and whose
# `training_step` only collects features into a memory bank: Lightning fits without an
# optimizer, nothing is to be stepped. Twin: an optimizer is configured and the step logs its
# loss without returning it: the weights never move
LIGHTNING_HEAD = """
import torch
import torch.nn as nn
import lightning as L
from torch.utils.data import DataLoader, TensorDataset
"""
BANK = """
class Bank(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.bank = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        with torch.no_grad():
            self.bank.extend(self.net(x).tolist())

    def configure_optimizers(self):
        {configure}
"""
FIT = """
torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
model = Bank()
before = [p.detach().clone() for p in model.parameters()]
L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
          enable_model_summary=False, default_root_dir=ROOT).fit(model, data)
moved = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
"""


@pytest.mark.xdist_group("frameworks")  # lightning imported once (tests/conftest.py)
@pytest.mark.parametrize("configure,line", [
    ("return None", None),  # the look-alike: no optimizer, a feature-collecting fit
    ("return torch.optim.SGD(self.parameters(), lr=0.1)", 15),  # the twin
])
def test_fit_without_optimizer(configure: str, line: int | None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("lightning")
    src = LIGHTNING_HEAD + textwrap.dedent(BANK).replace("{configure}", configure)
    got = [(f.line, f.code) for f in check_source(src, "t.py") if f.code == "GT530"]
    assert got == ([] if line is None else [(line, "GT530")])
    ns: dict = {"ROOT": str(tmp_path)}
    exec(compile(src + FIT, "t.py", "exec"), ns)
    assert len(ns["model"].bank) == 32 and not ns["moved"]
