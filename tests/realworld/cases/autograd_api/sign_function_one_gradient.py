"""Binarizing Sign function with a training flag: backward returns one gradient for two inputs.

source: https://github.com/1zb/pytorch-image-comp-rnn/issues/4
kind: bug
symptom: crash
verified: RuntimeError: function SignFunctionBackward returned an incorrect number of gradients (expected 2, got 1)
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
        return grad_output  # ROOT


class Binarizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 4, 1, bias=False)

    def forward(self, x):
        return SignFunction.apply(torch.tanh(self.conv(x)), self.training)


binarizer = Binarizer()
codes = binarizer(torch.randn(2, 8, 4, 4))
loss = (codes - 1).pow(2).mean()
loss.backward()  # SYMPTOM
