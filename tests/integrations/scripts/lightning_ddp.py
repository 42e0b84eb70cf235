"""Lightning strategy="ddp", 2 CPU processes (gloo), an unused head: DDP raises at the 2nd
forward; each rank writes what the callback found to OUT/rank<r>.json."""
import json
import sys

import lightning.pytorch as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from gradtrace.integrations.lightning import GradtraceCallback


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)
        self.aux = nn.Linear(8, 1)  # <- unused

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.mse_loss(self.head(self.body(x)), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


out = sys.argv[1]
torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
cb = GradtraceCallback(every=1, report=out + "/report.html")
trainer = L.Trainer(strategy="ddp", accelerator="cpu", devices=2, max_steps=3, logger=False,
                    callbacks=[cb],
                    enable_progress_bar=False, enable_checkpointing=False,
                    enable_model_summary=False, default_root_dir=out)
try:
    trainer.fit(Net(), DataLoader(data, batch_size=4))
    err = None
except RuntimeError as e:
    err = str(e).splitlines()[0]
with open(f"{out}/rank{trainer.global_rank}.json", "w") as fh:
    json.dump({"error": err, "findings": [f.to_dict() for f in cb.findings],
               "logged": cb.logged}, fh)
