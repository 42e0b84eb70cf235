"""Trying to keep the gradient of a sigmoid output by setting requires_grad on it.

source: https://github.com/pytorch/pytorch/issues/3890
kind: bug
symptom: crash
verified: RuntimeError: you can only change requires_grad flags of leaf variables.
"""
import torch

x = torch.zeros(3, 3, requires_grad=True)
s = torch.sigmoid(x)
s.requires_grad = True  # ROOT
s.retain_grad()
total = torch.sum(s)
total.backward()
print(s.grad)
