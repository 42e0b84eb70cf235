"""Shapes of docs/triage/unseen48b.md (session 48): the danielzgsilva GT766 left by unseen46b
and unseen47b, fixed by a weightless module class of another file (NOTE [weightless class of
another file]), and the real GT107 that the same fact adds (RecBole's TransRec: an embedding
regulariser of another file called on detached embeddings). Each look-alike is silent and each
buggy twin reported; the two files are written as a small project in tmp_path and run on real
torch."""
from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings

torch = pytest.importorskip("torch")


def _project(tmp_path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch,
             checked: str, code: str) -> list[int]:
    """Write ``files`` into ``tmp_path``, make them importable, and return the lines of
    ``code`` that the checker reports in ``checked``."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"))
    found = check_paths([str(tmp_path / checked)], Settings()).findings
    monkeypatch.syspath_prepend(str(tmp_path))
    return [f.line for f in found if f.code == code]


@pytest.fixture(autouse=True)
def _fresh_modules() -> Iterator[None]:
    """The small projects' modules are imported fresh by each test and forgotten after it
    (another test file may have a package of the same name)."""
    yield
    for m in [m for m in sys.modules if m.startswith("u48b_")]:
        del sys.modules[m]


SMOOTH = """
    import numpy as np
    import torch
    import torch.nn as nn
    class Smooth(nn.Module):
        def __init__(self, n=3):
            super().__init__()
            {state}
        def forward(self, x):
            return x * {scale}
    """
ATTACK = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from u48b_smooth import Smooth
    class Attack(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.smoothing = Smooth()
        def forward(self, x, y):
            x = x.clone().detach().requires_grad_(True)
            F.mse_loss(self.model(x), y).backward()
            grad = self.smoothing(x.grad)
            return grad / (torch.sqrt(torch.sum(grad * grad, dim=1, keepdim=True)) + 1e-8)
    def run():
        model = nn.Linear(3, 1)
        with torch.no_grad():
            model.weight.zero_()
        attack = Attack(model)
        d = attack(torch.randn(4, 3), torch.randn(4, 1))
        if d.requires_grad:
            d.sum().backward()
            return d, attack.smoothing.scale.grad
        return d, None
    """


@pytest.mark.parametrize("state, scale, lines", [
    ("self.kernel = torch.from_numpy(np.linspace(0.5, 1.5, n).astype(np.float32))",
     "self.kernel", []),
    ("self.scale = nn.Parameter(torch.ones(n))", "self.scale", [14])],
    ids=["numpy-kernel-of-another-file", "parameter-of-another-file"])
def test_gradient_smoothed_by_a_weightless_class_of_another_file(
        tmp_path: Path, state: str, scale: str, lines: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """danielzgsilva/MonoDepthAttacks (attacks/pgd.py): PGD's `grad = self.smoothing(grad)`
    with `GaussianSmooth` of `attacks/translation_invariance.py`, a fixed kernel made with
    numpy: the normalised gradient of a plain backward holds no graph (look-alike: silent, the
    direction is finite and asks no gradient). Twin: the smoothing holds a parameter and the
    direction is backpropagated (reported; its gradient is NaN where the input gradient is
    0)."""
    files = {"u48b_smooth.py": SMOOTH.format(state=state, scale=scale),
             "u48b_attack.py": ATTACK}
    assert _project(tmp_path, files, monkeypatch, "u48b_attack.py", "GT766") == lines
    d, g = importlib.import_module("u48b_attack").run()
    if not lines:
        assert not d.requires_grad and bool(torch.isfinite(d).all())
    else:
        assert bool(torch.isnan(g).any())


EMB_LOSS = """
    import torch
    import torch.nn as nn
    class EmbLoss(nn.Module):
        def __init__(self, norm=2):
            super().__init__()
            self.norm = norm
        def forward(self, *embeddings):
            return sum(torch.norm(e, p=self.norm) for e in embeddings) / embeddings[0].shape[0]
    """
RECOMMENDER = """
    import torch
    import torch.nn as nn
    from u48b_losses import EmbLoss
    class Rec(nn.Module):
        def __init__(self):
            super().__init__()
            self.item_embedding = nn.Embedding(5, 3)
            self.emb_loss = EmbLoss()
        def calculate_loss(self, items, target):
            score = self.item_embedding(items).sum(-1)
            fit = ((score - target) ** 2).mean()
            reg = self.emb_loss(self.item_embedding(items){cut})
            return fit + 0.1 * reg
    def run():
        torch.manual_seed(0)
        model = Rec()
        items = torch.tensor([0, 1])
        model.calculate_loss(items, model.item_embedding(items).sum(-1).detach()).backward()
        return model.item_embedding.weight.grad
    """


@pytest.mark.parametrize("cut, lines", [("", []), (".detach()", [12])],
                         ids=["regulariser-of-another-file", "detached-regulariser"])
def test_regulariser_of_another_file_on_detached_embeddings(
        tmp_path: Path, cut: str, lines: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """RecBole's TransRec (c2, `sequential_recommender/transrec.py:98-100`, the three GT107
    the fact adds, all real): `self.emb_loss(self.item_embedding(pos_items).detach())` with
    `EmbLoss` of `recbole/model/loss.py`, which holds no weights: the regularisation term is a
    constant and regularises nothing (twin: reported; the fit term is 0 here, so the
    embedding gets no gradient at all). Look-alike: the embeddings not detached (silent; the
    regulariser's gradient reaches them)."""
    files = {"u48b_losses.py": EMB_LOSS, "u48b_rec.py": RECOMMENDER.format(cut=cut)}
    assert _project(tmp_path, files, monkeypatch, "u48b_rec.py", "GT107") == lines
    g = importlib.import_module("u48b_rec").run()
    assert (g is not None and bool(g.abs().sum() > 0)) == (not lines)
