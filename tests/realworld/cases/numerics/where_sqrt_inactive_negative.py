"""torch.where picks the identity for negative inputs, yet the inactive sqrt branch makes the gradient NaN.

source: https://github.com/pytorch/pytorch/issues/187297
kind: bug
symptom: silent
verified: xt.grad is tensor([nan, nan]) instead of [1., 1.]
"""
import torch

xt = torch.tensor([-1.0, -4.0], dtype=torch.float32, requires_grad=True)
y = torch.where(xt > 0, torch.sqrt(xt), xt).sum()  # ROOT
y.backward()
print("actual:", xt.grad)
