"""Crash: the training forward pass runs inside torch.no_grad()."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
with torch.no_grad():  # <- cause
    pred = model(x)
loss = F.mse_loss(pred, y)
loss.backward()
