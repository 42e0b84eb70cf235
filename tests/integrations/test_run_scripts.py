"""`gradtrace run` on trainer scripts points at the user's lines, never at library frames."""
from __future__ import annotations

import json
import textwrap
from importlib.util import find_spec
from pathlib import Path

import pytest

from gradtrace.runtime.runner import main

# find_spec, not an import: the scripts import lightning when they run; an import here would
# cost every xdist worker ~4 s of CPU at collection
pytestmark = [pytest.mark.skipif(find_spec("lightning") is None,
                                 reason="lightning is not installed"),
              # in the worker that has imported lightning and transformers' Trainer for
              # test_lightning.py and test_transformers.py (tests/conftest.py _SHARED_SETUP):
              # apart, these two runs paid the imports again, 5 s of CPU
              pytest.mark.xdist_group("frameworks")]

LIGHTNING = '''
import lightning.pytorch as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.mse_loss(self.head(self.body(x)), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
trainer = L.Trainer(max_steps=4, logger=False, enable_progress_bar=False,
                    enable_checkpointing=False, enable_model_summary=False)
trainer.fit(Net(), DataLoader(data, batch_size=4))  # <- step
'''


def _run(tmp_path: Path, source: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source).lstrip())
    out = tmp_path / "f.json"
    main(["--json-out", str(out), str(script)])
    capsys.readouterr()
    return json.loads(out.read_text())["findings"]


def test_lightning_optimizer_finding_points_at_the_fit_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = _run(tmp_path, LIGHTNING, capsys)
    line = LIGHTNING.lstrip().splitlines().index(
        next(s for s in LIGHTNING.lstrip().splitlines() if "# <- step" in s)) + 1
    assert [(f["code"], Path(f["path"]).name, f["line"]) for f in found] == [
        ("GT828", "train.py", line)]  # lr=0: the step never changes a parameter
    assert not any("site-packages" in r["path"] for f in found for r in f["related"])


HF = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                 bos_token_id=0, eos_token_id=0)
ids = torch.randint(1, 64, (16, 8))
args = TrainingArguments(output_dir="out", max_steps=4, per_device_train_batch_size=4,
                         learning_rate=0.0, report_to=[], save_strategy="no",
                         disable_tqdm=True, use_cpu=True)
trainer = Trainer(model=GPT2LMHeadModel(cfg), args=args,
                  train_dataset=[{"input_ids": r, "labels": r} for r in ids])
trainer.train()  # <- step
'''


def test_transformers_optimizer_finding_points_at_the_train_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    monkeypatch.chdir(tmp_path)
    found = _run(tmp_path, HF, capsys)
    lines = HF.lstrip().splitlines()
    line = lines.index(next(s for s in lines if "# <- step" in s)) + 1
    assert [(f["code"], Path(f["path"]).name, f["line"]) for f in found] == [
        ("GT828", "train.py", line)]
