"""Exact line search that reaches a zero vector: the gradient of x.norm() at zero is finite today.

source: https://github.com/pytorch/pytorch/issues/2421
kind: lookalike
verified: x.grad is tensor([0., 0., 0.]) and x stays finite
"""
import torch

x = torch.zeros(3, requires_grad=True)
opt = torch.optim.SGD([x], lr=0.1)

opt.zero_grad()
step_size = x.norm()
step_size.backward()
opt.step()
print(x.grad, x)
