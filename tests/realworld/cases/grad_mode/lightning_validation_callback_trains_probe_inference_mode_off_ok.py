"""Lightning callback trains a probe layer during validation with @torch.enable_grad and inference_mode=False.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/13948
kind: lookalike
"""
import numpy as np
import torch
from pytorch_lightning import Callback, Trainer
from pytorch_lightning.demos.boring_classes import BoringModel, RandomDataset
from torch.utils.data import DataLoader


class BoringCallback(Callback):
    def __init__(self):
        super().__init__()
        self.saved_batch = np.random.rand(32).astype(np.float32)
        self.out_ch = 2

    @torch.enable_grad()
    def _init_and_train_layer(self, feats):
        feats.requires_grad_()
        layer = torch.nn.Linear(2, self.out_ch, device=feats.device)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1)
        logits = layer(feats[None])
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(1, dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        opt.step()

    def _pred_feats(self, pl_module):
        saved_batch = torch.tensor(self.saved_batch, device=pl_module.device)
        return pl_module(saved_batch[None])[0]

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self._init_and_train_layer(self._pred_feats(pl_module))


val_data = DataLoader(RandomDataset(32, 64), batch_size=2)
model = BoringModel()
trainer = Trainer(
    inference_mode=False,
    default_root_dir="lightning_logs",
    limit_val_batches=1,
    max_epochs=1,
    enable_model_summary=False,
    enable_progress_bar=False,
    logger=False,
    callbacks=[BoringCallback()],
)
trainer.validate(model, val_data)
