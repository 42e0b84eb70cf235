"""Lightning training_step logs the loss and returns it.

source: https://github.com/graviraja/MLOps-Basics/issues/14
kind: lookalike
"""
import torch
import torch.nn.functional as F
import pytorch_lightning as pl
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class ColaModel(pl.LightningModule):
    def __init__(self, lr=1e-2):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = torch.nn.Linear(16, 32)
        self.W = torch.nn.Linear(32, 2)
        self.num_classes = 2

    def forward(self, x):
        return self.W(torch.relu(self.encoder(x)))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])


data = TensorDataset(torch.randn(64, 16), torch.randint(0, 2, (64,)))
model = ColaModel()
trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir="lightning_logs")
trainer.fit(model, DataLoader(data, batch_size=16))
