"""Weights cast with .type(torch.float) after requires_grad: the cast copy is not a leaf, its grad is None.

source: https://github.com/pytorch/pytorch/issues/10065
kind: bug
symptom: silent
verified: w1.grad is None after o.backward()
"""
import torch

w = torch.tensor([1., 2., 3.], dtype=torch.float64, requires_grad=True)
w1 = w.type(torch.float)  # ROOT
print(w1, w1.type(), w1.requires_grad)
for step in range(3):
    o = torch.mean(w1 * w1)
    o.backward(retain_graph=True)
    print(w1.grad)
