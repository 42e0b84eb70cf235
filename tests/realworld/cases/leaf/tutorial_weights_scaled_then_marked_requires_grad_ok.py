"""MNIST-from-scratch tutorial scales the random weights by 1/sqrt(784) first and only then calls requires_grad_(), so weights stays a leaf.

source: https://github.com/pytorch/tutorials/pull/3717
kind: lookalike
"""
import math

import torch

torch.manual_seed(0)
weights = torch.randn(784, 10) / math.sqrt(784)
weights.requires_grad_()
bias = torch.zeros(10, requires_grad=True)
lr = 0.5


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)


def model(xb):
    return log_softmax(xb @ weights + bias)


for step in range(3):
    xb, yb = torch.randn(64, 784), torch.randint(0, 10, (64,))
    loss = -model(xb)[range(64), yb].mean()
    loss.backward()
    with torch.no_grad():
        weights -= weights.grad * lr
        bias -= bias.grad * lr
        weights.grad.zero_()
        bias.grad.zero_()
assert weights.is_leaf
