"""`a = torch.tensor(5.0, requires_grad=True) * 0.1`: the multiplication makes `a` the non-leaf result, the real leaf is unnamed, so after c.backward() a.grad is None while b.grad is 1.

source: https://github.com/pytorch/pytorch/issues/91851
kind: bug
symptom: silent
verified: prints None tensor(1.) (torch warns about reading .grad of a non-leaf); scaling first and then setting a.requires_grad = True prints tensor(1.) tensor(1.)
"""
import torch

a = torch.tensor(5.0, requires_grad=True) * 0.1  # ROOT
b = torch.tensor(2.0, requires_grad=True)
c = a + b
c.backward()

print(a.grad, b.grad)
