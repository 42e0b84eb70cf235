"""A custom autograd.Function scales its input in place and returns it as-is, and the caller then scales that output in place again (logits *= self.s); autograd refuses an in-place change on a view produced by a custom Function, whose backward it would override.

source: https://github.com/pytorch/pytorch/issues/30454
kind: bug
symptom: crash
verified: This view was created inside a custom Function (or because an input was returned as-is)
"""
import torch
import torch.nn as nn


class CustomOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x *= 2.0
        return x

    @staticmethod
    def backward(ctx, grad_output):
        print('Running in backward...')
        grad_output *= 2.0
        return grad_output


def custom_op(x):
    return CustomOp.apply(x)


class Net(nn.Module):
    def __init__(self, in_channel, out_channel, scale=400.0):
        super(Net, self).__init__()
        self.fc = nn.Linear(in_channel, out_channel)
        self.s = scale

    def forward(self, input):
        x = self.fc(input)
        logits = custom_op(x)
        logits *= self.s  # ROOT
        return logits


if __name__ == '__main__':
    bs = 32
    in_channel = 16
    out_channel = 8
    dummy_x = torch.rand(bs, in_channel)
    net = Net(in_channel, out_channel)
    x = net(dummy_x)
    x.mean().backward()
