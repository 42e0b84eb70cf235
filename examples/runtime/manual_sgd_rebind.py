"""Crash: `w = w - lr * w.grad` makes w a new non-leaf tensor; its .grad is None."""
import torch

w = torch.randn(3, requires_grad=True)
x = torch.randn(10, 3)
for step in range(3):
    loss = (x @ w).pow(2).mean()
    loss.backward()
    w = w - 0.1 * w.grad  # <- cause
    w.grad.zero_()
