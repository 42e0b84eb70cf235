"""Silent: a learnable scale kept as a plain tensor attribute; model.parameters() misses it, so
the optimizer never updates it (it still gets a gradient)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.scale = torch.ones(1, requires_grad=True)  # <- cause

    def forward(self, x):
        return self.fc(x) * self.scale


model = Scaled()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(3):
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
