"""Trainer validates in the middle of an epoch; the rest of the epoch trains in eval mode.

source: https://github.com/wkentaro/pytorch-fcn/pull/56
kind: bug
symptom: silent
verified: self.model.training is False for the iterations after the first validate() in an epoch
"""
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, model, optim, train_loader, val_loader, interval_validate=2):
        self.model, self.optim = model, optim
        self.train_loader, self.val_loader = train_loader, val_loader
        self.interval_validate = interval_validate
        self.iteration = 0

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            for data, target in self.val_loader:
                self.model(data)

    def train_epoch(self):
        self.model.train()
        for batch_idx, (data, target) in enumerate(self.train_loader):
            self.iteration += 1
            if self.iteration % self.interval_validate == 0:
                self.validate()  # ROOT
            self.optim.zero_grad()
            score = self.model(data)
            loss = nn.functional.cross_entropy(score, target)
            loss.backward()
            self.optim.step()
            print(self.iteration, self.model.training)


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Dropout2d(0.5), nn.Conv2d(4, 3, 1))
loader = [(torch.randn(2, 3, 8, 8), torch.randint(0, 3, (2, 8, 8))) for _ in range(4)]
Trainer(model, torch.optim.SGD(model.parameters(), lr=1e-3), loader, loader[:1]).train_epoch()
