"""Crash: every parameter was frozen, so the loss does not require grad."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
model.requires_grad_(False)  # <- cause
x, y = torch.randn(16, 4), torch.randn(16, 1)
F.mse_loss(model(x), y).backward()
