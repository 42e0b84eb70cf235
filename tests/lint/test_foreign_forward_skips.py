"""GT5's dependency walk and a module of another file of the project whose ``forward`` reads an
argument only cut on some path (NOTE [parameter cuts], :func:`instance_skips`): LlamaGen's VQ
trainer steps the generator, then builds the discriminator's loss from the reconstruction made
before the step (a second forward feeds the generator's loss) through ``vq_loss(...,
optimizer_idx=1)``, whose forward reads it only as
``reconstructions.detach()`` there: nothing the step changes is in that graph (GT609 silent, the
script trains). Without the ``detach`` the discriminator's backward goes back into the
generator: reported at the step, and torch raises."""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings

VQ_LOSS = '''
import torch
from torch import nn


class VQLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.discriminator = nn.Linear(4, 1)

    def forward(self, codebook_loss, inputs, reconstructions, optimizer_idx):
        if optimizer_idx == 0:
            logits_fake = self.discriminator(reconstructions)
            return (inputs - reconstructions).abs().mean() + codebook_loss - logits_fake.mean()
        logits_real = self.discriminator(inputs.detach())
        logits_fake = self.discriminator(reconstructions{cut})
        return torch.relu(1 - logits_real).mean() + torch.relu(1 + logits_fake).mean()
'''
TRAIN = '''
import torch
from torch import nn

from losses.vq_loss import VQLoss


class VQModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.dec = nn.Linear(4, 4)

    def forward(self, x):
        z = torch.tanh(self.enc(x))
        return self.dec(z), z.pow(2).mean()


def main():
    vq_model = VQModel()
    vq_loss = VQLoss()
    optimizer = torch.optim.Adam(vq_model.parameters(), lr=1e-3)
    optimizer_disc = torch.optim.Adam(vq_loss.discriminator.parameters(), lr=1e-3)
    for x in [torch.randn(8, 4) for _ in range(3)]:
        optimizer.zero_grad()
        recons_imgs, codebook_loss = vq_model(x)
        recons_gen, codebook_gen = vq_model(x)
        loss_gen = vq_loss(codebook_gen, x, recons_gen, optimizer_idx=0)
        loss_gen.backward()
        optimizer.step()
        optimizer_disc.zero_grad()
        loss_disc = vq_loss(codebook_loss, x, recons_imgs, optimizer_idx=1)
        loss_disc.backward()
        optimizer_disc.step()


main()
'''
STEP_LINE = 29  # optimizer.step()


def project(root: Path, cut: str) -> Path:
    (root / "losses").mkdir()
    (root / "losses" / "__init__.py").write_text("")
    (root / "losses" / "vq_loss.py").write_text(VQ_LOSS.lstrip("\n").format(cut=cut))
    (root / "train.py").write_text(TRAIN.lstrip("\n"))
    return root / "train.py"


def run(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(path.parent))
    for m in [m for m in sys.modules if m == "losses" or m.startswith("losses.")]:
        monkeypatch.delitem(sys.modules, m)
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:  # the project's `losses` must not stay imported for the next test
        for m in [m for m in sys.modules if m == "losses" or m.startswith("losses.")]:
            del sys.modules[m]


def gt609(path: Path) -> list[int]:
    return [f.line for f in check_paths([str(path)], Settings()).findings if f.code == "GT609"]


def test_reconstruction_read_detached_by_the_loss_module_is_silent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = project(tmp_path, ".detach()")
    assert path.read_text().splitlines()[STEP_LINE - 1].strip() == "optimizer.step()"
    assert gt609(path) == []
    run(path, monkeypatch)


def test_reconstruction_read_live_is_reported_at_the_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = project(tmp_path, "")
    assert gt609(path) == [STEP_LINE]
    with pytest.raises(RuntimeError):
        run(path, monkeypatch)
