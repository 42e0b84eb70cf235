"""Composer trainer calls backward() on each loss of a model's loss tuple; the losses share one graph.

source: https://github.com/mosaicml/composer/pull/1240
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def ensure_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


class ComposerClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, batch):
        x, _ = batch
        return self.head(self.body(x))

    def loss(self, outputs, batch):
        _, y = batch
        return F.cross_entropy(outputs, y), 1e-3 * outputs.pow(2).mean()


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def _train_microbatch(self, batch):
        outputs = self.model(batch)
        losses = self.model.loss(outputs, batch)
        total_loss = 0.0
        for loss in ensure_tuple(losses):
            total_loss += loss.detach().clone()
        for loss in ensure_tuple(losses):  # ROOT
            loss.backward()  # SYMPTOM
        return total_loss

    def fit(self, dataloader):
        for batch in dataloader:
            self.optimizer.zero_grad()
            self._train_microbatch(batch)
            self.optimizer.step()


torch.manual_seed(0)
model = ComposerClassifier()
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
trainer.fit([(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(2)])
