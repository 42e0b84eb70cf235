"""Sparsity penalty with a fractional p-norm on weights that contain exact zeros: finite gradient today.

source: https://github.com/pytorch/pytorch/issues/44452
kind: lookalike
verified: w.grad is finite (0 at the zero entry) and w changes after a step
"""
import torch

w = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
loss = w.norm(p=0.5)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(w.grad, w)
