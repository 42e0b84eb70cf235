"""Chemprop fine-tuning freezes the encoder's BatchNorm by requires_grad only; its running statistics keep moving.

source: https://github.com/chemprop/chemprop/pull/952
kind: bug
symptom: silent
verified: model.bn.running_mean changes every training step although the encoder is "frozen"
"""
import torch
from torch import nn


class MPNN(nn.Module):
    def __init__(self, d_in=6, d_h=16, n_tasks=1):
        super().__init__()
        self.message_passing = nn.Sequential(nn.Linear(d_in, d_h), nn.ReLU(), nn.Dropout(0.1))
        self.bn = nn.BatchNorm1d(d_h)
        self.predictor = nn.Sequential(nn.Linear(d_h, d_h), nn.ReLU(), nn.Linear(d_h, n_tasks))

    def forward(self, x):
        return self.predictor(self.bn(self.message_passing(x)))


torch.manual_seed(0)
model = MPNN()
freeze_encoder = True
if freeze_encoder:
    model.message_passing.apply(lambda module: module.requires_grad_(False))
    model.message_passing.apply(lambda m: setattr(m, "p", 0.0) if isinstance(m, torch.nn.Dropout) else None)
    model.bn.apply(lambda module: module.requires_grad_(False))  # ROOT
optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
train_loader = [(torch.randn(8, 6) * 3 + 1, torch.randn(8, 1)) for _ in range(3)]
for epoch in range(2):
    model.train()
    for x, y in train_loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
