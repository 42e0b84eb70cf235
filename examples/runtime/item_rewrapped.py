"""Crash: the loss is rebuilt from Python floats with torch.tensor(...), losing the graph."""
import torch
import torch.nn as nn
import torch.nn.functional as F

model = nn.Linear(4, 1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
parts = [F.mse_loss(model(x[i:i + 4]), y[i:i + 4]).item() for i in range(0, 16, 4)]  # <- cause
loss = torch.tensor(parts).mean()
loss.backward()
