"""Crash: a per-sample loss (reduction='none') is not a scalar."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
loss = F.mse_loss(model(x), y, reduction="none")  # <- cause
loss.backward()
