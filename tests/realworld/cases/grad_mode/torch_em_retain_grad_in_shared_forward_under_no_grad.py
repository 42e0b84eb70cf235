"""torch-em trainer calls pred.retain_grad() in the forward-and-loss helper that validation also runs under torch.no_grad().

source: https://github.com/constantinpape/torch-em/pull/57
kind: bug
symptom: crash
verified: RuntimeError: can't retain_grad on Tensor that has requires_grad=False
"""
import torch
import torch.nn as nn


class DefaultTrainer:
    def __init__(self, model, loss, optimizer, train_loader, val_loader):
        self.model, self.loss, self.optimizer = model, loss, optimizer
        self.train_loader, self.val_loader = train_loader, val_loader

    def _forward_and_loss(self, x, y):
        pred = self.model(x)
        pred.retain_grad()  # ROOT
        loss = self.loss(pred, y)
        return pred, loss

    def _train_epoch(self):
        self.model.train()
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            pred, loss = self._forward_and_loss(x, y)
            loss.backward()
            self.optimizer.step()

    def _validate_impl(self):
        self.model.eval()
        metric = 0.0
        with torch.no_grad():
            for x, y in self.val_loader:
                pred, loss = self._forward_and_loss(x, y)  # SYMPTOM
                metric += loss.item()
        return metric / len(self.val_loader)

    def fit(self, epochs):
        for _ in range(epochs):
            self._train_epoch()
            self._validate_impl()


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 1))
loader = [(torch.randn(2, 1, 16, 16), torch.rand(2, 1, 16, 16)) for _ in range(2)]
trainer = DefaultTrainer(model, nn.MSELoss(), torch.optim.Adam(model.parameters(), lr=1e-4), loader, loader)
trainer.fit(1)
