"""Gradients computed by hand with torch.autograd.grad over net.parameters(); the fixed tensor is a buffer.

source: https://github.com/typoverflow/UtilsRL/issues/11
kind: lookalike
"""
import torch as t
import torch.nn.functional as F
from torch import nn

t.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self._x = nn.Parameter(t.randn(2, 2))
        self.register_buffer('_y', t.randn(2, 2))

    def forward(self, input):
        return F.linear(input, self._x) + F.linear(input, self._y)


net = Net()
inp = t.randn(4, 2)
loss = net(inp).pow(2).mean()
grads = t.autograd.grad(loss, list(net.parameters()))
with t.no_grad():
    for p, g in zip(net.parameters(), grads):
        p -= 0.1 * g
