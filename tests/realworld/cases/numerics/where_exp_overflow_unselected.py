"""torch.where guards exp against overflow, yet the gradient of the guarded element is NaN.

source: https://github.com/pytorch/pytorch/issues/156212
kind: bug
symptom: silent
verified: x.grad is tensor([2.7183, nan]) although exp(1e10) is never selected
"""
import torch

x_th = torch.tensor(10.0)
x = torch.tensor([1.0, 1e10], requires_grad=True)
b = torch.tensor(1.0)

x_out = torch.where(x <= x_th, torch.exp(x), b)  # ROOT
l = x_out.sum()
l.backward()
print(x_out, x.grad)
