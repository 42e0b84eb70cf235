"""Building the optimizer from itertools.chain(*net.parameters(), W): the star unpacks each Parameter as its own iterable, so chain yields the rows of the weight (views, not leaves) instead of the parameters.

source: https://github.com/pytorch/pytorch/issues/4957
kind: bug
symptom: crash
verified: can't optimize a non-leaf Tensor
"""
import itertools

import torch

torch.manual_seed(0)
net = torch.nn.Linear(1, 1)
W = torch.zeros(1, 1, requires_grad=True)

optimizer = torch.optim.Adam(itertools.chain(*net.parameters(), W))  # ROOT
x, y = torch.randn(8, 1), torch.randn(8, 1)
loss = ((net(x) @ W - y) ** 2).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
