"""Sigmoid written by hand, then one element overwritten: backward works.

source: https://github.com/pytorch/pytorch/issues/9391
kind: lookalike
verified: a.grad is set each step and a changes
"""
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
opt = torch.optim.SGD([a], lr=0.1)
for step in range(3):
    opt.zero_grad()
    b = 1 / ((-a).exp() + 1)
    b[1] = 2
    b.sum().backward()
    opt.step()
print(a.grad)
