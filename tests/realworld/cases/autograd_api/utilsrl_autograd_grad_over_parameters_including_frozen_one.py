"""Gradients computed by hand with torch.autograd.grad over net.parameters(), one of which is a frozen nn.Parameter.

source: https://github.com/typoverflow/UtilsRL/issues/11
kind: bug
symptom: crash
verified: RuntimeError: One of the differentiated Tensors does not require grad
"""
import torch as t
import torch.nn.functional as F
from torch import nn

t.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self._x = nn.Parameter(t.randn(2, 2))
        self._y = nn.Parameter(t.randn(2, 2), requires_grad=False)  # ROOT

    def forward(self, input):
        return F.linear(input, self._x) + F.linear(input, self._y)


net = Net()
inp = t.randn(4, 2)
loss = net(inp).pow(2).mean()
grads = t.autograd.grad(loss, list(net.parameters()))  # SYMPTOM
with t.no_grad():
    for p, g in zip(net.parameters(), grads):
        p -= 0.1 * g
