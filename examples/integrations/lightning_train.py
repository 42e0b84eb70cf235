"""Lightning + gradtrace in one line: the callback names the head that never trains.

    python examples/integrations/lightning_train.py

The bug on purpose: ``self.aux`` is built but never used in ``training_step``, so its
parameters never get a gradient. The callback prints them with the line that creates them,
logs the gradient flow to the CSV logger and writes ``gradtrace.html`` in the log dir.
"""
import tempfile

import lightning.pytorch as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from gradtrace.integrations.lightning import GradtraceCallback


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)
        self.aux = nn.Linear(32, 1)  # <- never used: gets no gradient

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.head(self.body(x)), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    out = tempfile.mkdtemp(prefix="gradtrace-lightning-")
    cb = GradtraceCallback(every=2)
    trainer = L.Trainer(max_steps=8, callbacks=[cb], default_root_dir=out,
                        logger=L.loggers.CSVLogger(out), enable_progress_bar=False,
                        enable_checkpointing=False, accelerator="cpu", devices=1)
    trainer.fit(Regressor(), DataLoader(data, batch_size=32))
    for step, metrics in cb.logged:
        print(step, {k: round(v, 4) for k, v in metrics.items() if "total" in k})
    print("findings:", [f"{f.code} {f.path}:{f.line}" for f in cb.findings])


if __name__ == "__main__":
    main()
