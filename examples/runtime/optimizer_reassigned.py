"""Crash: `optimizer = optimizer.step()` replaces the optimizer with None."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(3):
    optimizer.zero_grad()
    F.mse_loss(model(x), y).backward()
    optimizer = optimizer.step()  # <- cause
