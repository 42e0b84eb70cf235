"""A binary focal loss clamps the sigmoid output with torch.clamp(y_pred, eps, 1 - eps), eps = 1e-8, before taking log(y_pred) and log(1 - y_pred); in float32 1 - 1e-8 is exactly 1.0, so a saturated prediction stays 1.0, log(1 - y_pred) is -inf and the (1 - y_true) * ... * log(1 - y_pred) term for a positive label is 0 * -inf = NaN (under apex amp the dynamic loss scale then collapses: "ZeroDivisionError: float division by zero").

source: https://github.com/NVIDIA/apex/issues/358
kind: bug
symptom: silent
verified: with 2 of 32 sigmoid outputs saturated at exactly 1.0 (both on positive labels) the loss is nan and the weights are nan after one SGD step; with the epsilon inside the logs (log(y_pred + eps), log(1 - y_pred + eps), the answer in the thread) the loss is 0.743 and the weights stay finite
"""
import torch
import torch.nn as nn


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0, eps=1e-8):
        super().__init__()
        self.gamma, self.eps = gamma, eps

    def forward(self, y_pred, y_true):
        y_pred = torch.clamp(y_pred, self.eps, 1 - self.eps)
        y_true = y_true.unsqueeze(1)
        y_pred = y_pred.unsqueeze(1)
        loss = torch.sum(y_true * torch.pow(1 - y_pred, self.gamma) * torch.log(y_pred)
                         + (1 - y_true) * torch.pow(y_pred, self.gamma) * torch.log(1 - y_pred), dim=1)  # ROOT
        return -1.0 * loss.sum() / y_pred.size(0)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())
criterion = FocalLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 10)
x[:8] *= 60.0  # a few confident samples
y_true = torch.randint(0, 2, (32,)).float()
y_pred = model(x).squeeze(1)
y_true[y_pred.detach() == 1] = 1.0  # the confident samples are positives
print("saturated predictions", int((y_pred == 1).sum()))
loss = criterion(y_pred, y_true)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", loss.item(), "weights finite", all(bool(torch.isfinite(p).all()) for p in model.parameters()))
