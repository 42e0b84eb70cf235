"""Binarizing Sign function with a training flag: backward returns None for the flag.

source: https://github.com/1zb/pytorch-image-comp-rnn/issues/4
kind: lookalike
verified: binarizer.conv.weight.grad is set and the weight changes
"""
import torch
import torch.nn as nn
from torch.autograd import Function

torch.manual_seed(0)


class SignFunction(Function):
    @staticmethod
    def forward(ctx, input, is_training=True):
        if is_training:
            prob = input.new(input.size()).uniform_()
            x = input.clone()
            x[(1 - input) / 2 <= prob] = 1
            x[(1 - input) / 2 > prob] = -1
            return x
        return input.sign()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class Binarizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 4, 1, bias=False)

    def forward(self, x):
        return SignFunction.apply(torch.tanh(self.conv(x)), self.training)


binarizer = Binarizer()
opt = torch.optim.SGD(binarizer.parameters(), lr=0.1)
before = binarizer.conv.weight.detach().clone()
codes = binarizer(torch.randn(2, 8, 4, 4))
loss = (codes - 1).pow(2).mean()
loss.backward()
opt.step()
print(not torch.equal(before, binarizer.conv.weight))
