"""SMAPE loss: |y - t| / (|y| + |t|) is 0/0 = NaN where both are 0, and the NaNs are masked out only after the division; the masked-out entries still send 0/0 through DivBackward, which anomaly mode reports.

source: https://github.com/pytorch/pytorch/issues/22820
kind: bug
symptom: crash
verified: Function 'DivBackward0' returned nan values in its 0th output
"""
import torch
import torch.nn as nn


class Forecaster(nn.Module):
    def __init__(self, n_in=8, n_out=3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 16), nn.Tanh(), nn.Linear(16, n_out), nn.ReLU())

    def forward(self, x):
        return self.net(x)


def smape_loss(model_outputs, target_outputs):
    numerator = torch.abs(model_outputs - target_outputs)
    denominator = torch.abs(model_outputs) + torch.abs(target_outputs)
    elementwise_smape = torch.div(numerator, denominator)  # ROOT
    nan_mask = torch.isnan(elementwise_smape)
    loss = elementwise_smape[~nan_mask].mean()
    assert ~torch.isnan(loss)
    return loss


torch.autograd.set_detect_anomaly(True)
torch.manual_seed(0)
model = Forecaster()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
history = torch.randn(16, 8)
target_outputs = torch.relu(torch.randn(16, 3))  # demand series with zero days
model_outputs = model(history)
loss = smape_loss(model_outputs, target_outputs)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
