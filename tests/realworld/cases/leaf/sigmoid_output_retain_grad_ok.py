"""Keeping the gradient of a sigmoid output with retain_grad() alone.

source: https://github.com/pytorch/pytorch/issues/3890
kind: lookalike
verified: s.grad is all ones and x.grad is 0.25 everywhere
"""
import torch

x = torch.zeros(3, 3, requires_grad=True)
s = torch.sigmoid(x)
s.retain_grad()
total = torch.sum(s)
total.backward()
print(s.grad, x.grad)
