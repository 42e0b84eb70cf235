"""Crash: a manual update of a leaf that requires grad, outside torch.no_grad()."""
import torch

w = torch.randn(3, requires_grad=True)
x = torch.randn(10, 3)
loss = (x @ w).pow(2).mean()
loss.backward()
w -= 0.1 * w.grad  # <- cause
