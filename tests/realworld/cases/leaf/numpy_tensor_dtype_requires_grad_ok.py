"""A tensor made from a numpy array with the dtype given to torch.tensor: it is the leaf itself.

source: https://github.com/pytorch/pytorch/issues/7335
kind: lookalike
verified: a.grad is tensor([1., 1., 1.])
"""
import numpy as np
import torch

a = torch.tensor(np.array([1.0, 2.0, 3.0]), dtype=torch.float, requires_grad=True)
b = torch.ones(3)
l = a @ b
l.backward()
print(a.grad)
