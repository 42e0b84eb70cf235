"""Crash: `.item()` turned the loss into a Python float before backward()."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
loss = F.mse_loss(model(x), y).item()  # <- cause
print(f"loss {loss:.3f}")
loss.backward()
