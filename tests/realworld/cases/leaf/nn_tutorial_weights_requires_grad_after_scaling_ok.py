"""Xavier-scaled weights: divided first, requires_grad_() set afterwards, so they stay a leaf.

source: https://github.com/pytorch/tutorials/issues/3716
kind: lookalike
verified: weights.grad is set and the loss falls
"""
import math

import torch

torch.manual_seed(0)
x_train = torch.randn(64, 784)
y_train = torch.randint(0, 10, (64,))

weights = torch.randn(784, 10) / math.sqrt(784)
weights.requires_grad_()
bias = torch.zeros(10, requires_grad=True)


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)


def model(xb):
    return log_softmax(xb @ weights + bias)


def nll(input, target):
    return -input[range(target.shape[0]), target].mean()


lr, bs = 0.5, 16
for epoch in range(2):
    for i in range(0, 64, bs):
        xb, yb = x_train[i:i + bs], y_train[i:i + bs]
        loss = nll(model(xb), yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * lr
            bias -= bias.grad * lr
            weights.grad.zero_()
            bias.grad.zero_()
