"""Functional block applies F.relu(x, inplace=True) and F.dropout(x, inplace=True) directly to a leaf input that requires grad.

source: https://github.com/pytorch/pytorch/issues/727
kind: bug
symptom: crash
verified: RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.
"""
import numpy as np
import torch
import torch.nn.functional as F

x = torch.from_numpy(np.random.randn(4, 6, 10, 10)).float().requires_grad_(True)
x = F.relu(x, inplace=True)  # ROOT
x = F.dropout(x, p=0.1, inplace=True)
result = torch.sum(x)
result.backward()
