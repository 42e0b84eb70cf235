"""Crash: a loss built from argmax (not differentiable) has no grad_fn."""
import torch
import torch.nn as nn

model = nn.Linear(4, 3)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
pred = model(x).argmax(dim=1)  # <- cause
loss = (pred != y).float().mean()
loss.backward()
