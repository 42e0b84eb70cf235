"""The tensor is scaled by the constant first and only then marked `a.requires_grad = True`, so `a` is a leaf and gets its gradient.

source: https://github.com/pytorch/pytorch/issues/91851
kind: lookalike
verified: prints tensor(1.) tensor(1.)
"""
import torch

a = torch.tensor(5.0) * 0.1
a.requires_grad = True
b = torch.tensor(2.0, requires_grad=True)
c = a + b
c.backward()
print(a.grad, b.grad)
