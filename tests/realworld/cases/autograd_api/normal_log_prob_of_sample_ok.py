"""Gaussian policy gradient: log_prob of a sample()'d action, so the mean head is trained.

source: https://github.com/pytorch/pytorch/issues/10943
kind: lookalike
verified: mean_head.weight.grad is non-zero
"""
import torch
import torch.nn as nn
from torch.distributions import Normal

torch.manual_seed(0)
mean_head = nn.Linear(3, 1)
logvar_head = nn.Linear(3, 1)
optimizer = torch.optim.SGD(list(mean_head.parameters()) + list(logvar_head.parameters()), lr=0.1)

x = torch.randn(1, 3)
d = Normal(mean_head(x), torch.exp(0.5 * logvar_head(x)))
a = d.sample()
L = -(d.log_prob(a) * 1.5).sum()
optimizer.zero_grad()
L.backward()
optimizer.step()
print("mean grad:", mean_head.weight.grad)
