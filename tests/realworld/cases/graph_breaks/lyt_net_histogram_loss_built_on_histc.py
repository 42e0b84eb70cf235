"""LYT-Net style combined loss: the color-histogram term is built on torch.histc.

source: https://github.com/albrateanu/LYT-Net/issues/17
kind: bug
symptom: silent
verified: histc output has no grad_fn on torch 2.13 (older versions raised "the derivative for 'histc' is not implemented"); the model's gradient is identical with and without the histogram term
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class HistogramLoss(nn.Module):
    def __init__(self, bins=32):
        super().__init__()
        self.bins = bins

    def forward(self, y_true, y_pred):
        hist_true = torch.histc(y_true, bins=self.bins, min=0.0, max=1.0)
        hist_pred = torch.histc(y_pred, bins=self.bins, min=0.0, max=1.0)  # ROOT
        hist_true = hist_true / hist_true.sum()
        hist_pred = hist_pred / hist_pred.sum()
        return F.l1_loss(hist_pred, hist_true)


class CombinedLoss(nn.Module):
    def __init__(self, alpha1=1.0, alpha2=0.5):
        super().__init__()
        self.hist_loss = HistogramLoss()
        self.alpha1, self.alpha2 = alpha1, alpha2

    def forward(self, y_true, y_pred):
        l1 = F.l1_loss(y_pred, y_true)
        return self.alpha1 * l1 + self.alpha2 * self.hist_loss(y_true, y_pred)


model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Sigmoid())
criterion = CombinedLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
for step in range(3):
    low, high = torch.rand(2, 3, 16, 16) * 0.3, torch.rand(2, 3, 16, 16)
    loss = criterion(high, model(low))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
