"""Piecewise function with torch.where: log2 on one side, 2x on the other; NaN gradient at 0.

source: https://github.com/pytorch/pytorch/issues/108618
kind: bug
symptom: silent
verified: x1.grad is tensor([nan, 2.0000, 0.4809])
"""
import torch

x1 = torch.tensor([0.0, 2.0, 3.0], requires_grad=True)

y1 = torch.where(x1 > 2, torch.log2(x1), 2 * x1)  # ROOT
z1 = y1.sum()
z1.backward()
print("y1 =", y1)
print("x1.grad =", x1.grad)
