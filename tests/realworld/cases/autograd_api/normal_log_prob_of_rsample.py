"""Gaussian policy gradient: log_prob of an rsample'd action gives the mean head zero gradient.

source: https://github.com/pytorch/pytorch/issues/10943
kind: bug
symptom: silent
verified: mean_head.weight.grad is all zeros after backward
"""
import torch
import torch.nn as nn
from torch.distributions import Normal

torch.manual_seed(0)
mean_head = nn.Linear(3, 1)
logvar_head = nn.Linear(3, 1)

x = torch.randn(1, 3)
mean = mean_head(x)
logvar = logvar_head(x)
std = torch.exp(0.5 * logvar)

d = Normal(mean, std)
a = d.rsample()  # ROOT
logprob = d.log_prob(a)
L = -logprob.sum()
mean_head.zero_grad()
logvar_head.zero_grad()
L.backward()
print("mean grad:", mean_head.weight.grad)
print("std grad:", logvar_head.weight.grad)
