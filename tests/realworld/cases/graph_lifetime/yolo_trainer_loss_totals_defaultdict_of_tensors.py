"""YOLO (MultimediaTechLab) trainer: per-loss running totals are a defaultdict of tensors and `total_loss[name] += loss_val * batch_size` adds the graph-carrying loss terms, so every batch's graph stays alive for the whole epoch.

source: https://github.com/MultimediaTechLab/YOLO/pull/83
kind: bug
symptom: silent
verified: after the epoch total_loss['BoxLoss'] has a grad_fn whose chain reaches every batch's forward (memory grows ~1-2 MB a batch)
"""
from collections import defaultdict

import torch
import torch.nn as nn


class YOLOLoss(nn.Module):
    def forward(self, predicts, targets):
        box_loss = (predicts[..., :4] - targets[..., :4]).abs().mean()
        cls_loss = nn.functional.binary_cross_entropy_with_logits(predicts[..., 4:], targets[..., 4:])
        loss_dict = {"BoxLoss": box_loss, "BCELoss": cls_loss}
        return box_loss * 7.5 + cls_loss * 0.5, loss_dict


class ModelTrainer:
    def __init__(self, model, device):
        self.model = model
        self.device = device
        self.loss_fn = YOLOLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937)

    def train_one_batch(self, images, targets):
        self.optimizer.zero_grad()
        predicts = self.model(images)
        loss, loss_item = self.loss_fn(predicts, targets)
        loss.backward()
        self.optimizer.step()
        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))
        total_samples = 0
        for batch_size, images, targets in dataloader:
            loss_each = self.train_one_batch(images, targets)
            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val * batch_size  # ROOT
            total_samples += batch_size
        for loss_name in total_loss:
            total_loss[loss_name] /= total_samples
        return total_loss


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.SiLU(), nn.Linear(32, 9))
trainer = ModelTrainer(model, torch.device("cpu"))
dataloader = [(4, torch.randn(4, 16), torch.rand(4, 9)) for _ in range(5)]
for epoch in range(2):
    epoch_loss = trainer.train_one_epoch(dataloader)
    print({k: round(v.item(), 4) for k, v in epoch_loss.items()})
