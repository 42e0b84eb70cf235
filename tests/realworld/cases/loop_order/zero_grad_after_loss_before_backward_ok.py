"""Flow-model demo computes the loss first and calls optimizer.zero_grad() just before backward.

source: https://github.com/rll/deepul/issues/12
kind: lookalike
"""
import torch
import torch.nn as nn


class Flow(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_scale = nn.Parameter(torch.zeros(2))
        self.shift = nn.Parameter(torch.zeros(2))

    def nll(self, x):
        z = (x - self.shift) * torch.exp(-self.log_scale)
        log_pz = -0.5 * z ** 2 - 0.9189385
        return -(log_pz - self.log_scale).sum(1).mean()


torch.manual_seed(0)
model = Flow()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
train_loader = [torch.randn(16, 2) * 3 + 1 for _ in range(5)]
model.train()
for epoch in range(2):
    for x in train_loader:
        x = x.float()
        loss = model.nll(x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
