"""Calling .view() on a tensor right after making it require grad: its .grad stays None.

source: https://github.com/pytorch/pytorch/issues/1479
kind: bug
symptom: silent
verified: b.grad is None after backward
"""
import torch

a = torch.tensor([1.0, 2.0, 3.0]).view(1, 3)
b = torch.tensor([4.0, 5.0, 6.0], requires_grad=True).view(3, 1)  # ROOT
c = a.mm(b).sum()
c.backward()
print(a.requires_grad, b.requires_grad)
print(b.grad)
