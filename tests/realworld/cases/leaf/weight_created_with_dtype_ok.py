"""Weights created directly with the float dtype and requires_grad: a leaf whose grad fills in.

source: https://github.com/pytorch/pytorch/issues/10065
kind: lookalike
verified: w1.grad is tensor([0.6667, 1.3333, 2.0000])
"""
import torch

w1 = torch.tensor([1, 2, 3], requires_grad=True, dtype=torch.float)
print(w1, w1.type(), w1.requires_grad)
o = torch.mean(w1 * w1)
o.backward()
print(w1.grad)
