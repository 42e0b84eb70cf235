"""A tensor made from a numpy array with requires_grad=True, then cast: its .grad stays None.

source: https://github.com/pytorch/pytorch/issues/7335
kind: bug
symptom: silent
verified: a.grad is None after backward (the grad went to the tensor before the cast)
"""
import numpy as np
import torch

a = torch.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True).float()  # ROOT
print(a.requires_grad, a.dtype)
b = torch.ones(3)
l = a @ b
print(l.item())
l.backward()
print(a.grad)
