"""Functional block applies F.relu(inplace=True) to a convolution output, a non-leaf that relu may overwrite.

source: https://github.com/pytorch/pytorch/issues/727
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

conv = nn.Conv2d(6, 6, 3, padding=1)
x = torch.from_numpy(np.random.randn(4, 6, 10, 10)).float().requires_grad_(True)
h = F.relu(conv(x), inplace=True)
result = torch.sum(h)
result.backward()
print(x.grad.shape, conv.weight.grad.shape)
