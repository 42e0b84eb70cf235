"""The binary focal loss with the answer from the thread: eps is added inside both logs, so a prediction that rounds to exactly 1.0 gives log(1 - 1 + 1e-8), a finite value, and the loss and gradients stay finite.

source: https://github.com/NVIDIA/apex/issues/358
kind: lookalike
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
        loss = torch.sum(y_true * torch.pow(1 - y_pred, self.gamma) * torch.log(y_pred + self.eps)
                         + (1 - y_true) * torch.pow(y_pred, self.gamma) * torch.log(1 - y_pred + self.eps), dim=1)
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
